"""Build each request's contexts and run its view inside the tenant's scope."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from tenancy import current, roles, support
from tenancy.admin_fence import sees_every_tenant
from tenancy.contexts import AppType, OpContext, RequestContext, new_request_context
from tenancy.modes import current_tenancy
from wqcore.conf import system_alias
from wqcore.scope import bypasses_rls, system_scope, tenant_scope
from wqcore.tracing import current_traceparent


def _request_context(request: HttpRequest) -> RequestContext:
    rctx = new_request_context(AppType.WEB, traceparent=current_traceparent())
    given = request.headers.get("X-Request-ID", "")
    try:
        return RequestContext(rctx.app, uuid.UUID(given), rctx.traceparent) if given else rctx
    except ValueError:
        return rctx


def _in_admin(request: HttpRequest) -> bool:
    match = getattr(request, "resolver_match", None)
    return bool(match and "admin" in match.namespaces)


def _needs_every_tenant(request: HttpRequest) -> bool:
    """The operator's (and a viewer's) admin pages on a system login without BYPASSRLS (one
    login that owns the tables): they read across tenants, explicitly, inside a system scope."""
    return sees_every_tenant(request) and _in_admin(request) and not bypasses_rls(system_alias())


def _support_banner(request: HttpRequest) -> None:
    """Say on each page drawn in a support view which tenant it shows and how to leave."""
    from django.contrib import messages
    from django.urls import reverse
    from django.utils.html import format_html

    org_id = request.support_org_id  # type: ignore[attr-defined]
    names = current_tenancy().tenant_names([org_id])
    messages.info(
        request,
        format_html(
            "Support view of tenant {}: you see what its staff see, and each page and action "
            'is audited. <a href="{}" id="support-leave">Leave the support view</a>',
            names.get(org_id, org_id),
            reverse("admin:workqueue_tenancy_support"),
        ),
        fail_silently=True,
    )


@contextmanager
def _scopes(op: OpContext | None, every_tenant: bool) -> Iterator[None]:
    with tenant_scope(op.org_id) if op is not None else _nothing():
        if every_tenant:
            with system_scope():
                yield
        else:
            yield


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def tenant_free[V: Callable[..., Any]](view: V) -> V:
    """Mark ``view`` as reading no tenant's rows (a health check, a scrape): the middleware
    names no context for it and opens no scope, so it answers even when no tenant's scope
    could begin (as ``csrf_exempt`` marks a view for the CSRF check)."""
    view.tenant_free = True  # type: ignore[attr-defined]
    return view


class TenancyMiddleware:
    """Sets ``request.rctx`` always and ``request.op`` when the site's tenancy names a tenant
    for the request (``tenancy.modes``), then runs the view (and renders its template response)
    inside ``tenant_scope(op.org_id)``. ``request.op`` is also the current context
    (``tenancy.current``) for the view, sync or async, and ends with the request: code handed no
    context (Django's ``Task.enqueue()``) finds it there.

    The scope wraps the view itself, as Django's ``ATOMIC_REQUESTS`` does, not the middleware
    chain: by the time a view's exception reaches a middleware, Django has turned it into a 500
    response, so a scope around ``get_response`` would commit a failed request's writes. List it
    last in ``MIDDLEWARE`` (after the authentication middleware) so every other
    ``process_view`` runs first. A view marked ``tenant_free`` runs as it is (``request.op``
    None, no scope).

    In the admin, two roles change this (``tenancy.roles``, ``tenancy.support``): a viewer's
    request that is not a read is refused (403) before its view runs; and a request of a
    support view runs as that tenant's staff, in its scope, told to ``support_seen`` (the
    audit trail) in the same transaction as what the view did.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rctx = _request_context(request)
        request.rctx = rctx  # type: ignore[attr-defined]
        request.op = None  # type: ignore[attr-defined]
        # process_view names the request's context; it ends here, whatever the view did.
        token = current.bind(None)
        try:
            return self.get_response(request)
        finally:
            current.unbind(token)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        if getattr(view_func, "tenant_free", False):
            return None
        in_admin = _in_admin(request)
        rctx = request.rctx  # type: ignore[attr-defined]
        org_id = support.chosen(request) if in_admin else None
        request.support_org_id = org_id  # type: ignore[attr-defined]
        if org_id is not None:
            op: OpContext | None = support.support_context(request, rctx, org_id)
        else:
            op = current_tenancy().request_context(request, rctx)
        if in_admin and (refused := roles.refusal(request)) is not None:
            if org_id is not None and op is not None:  # a viewer's post in a support view
                support.request_seen(request, op, 403)
            raise PermissionDenied(refused)
        request.op = op  # type: ignore[attr-defined]
        current.bind(op)  # ended by __call__ (an async view runs after this method returns)
        if inspect.iscoroutinefunction(view_func):
            # An async view: its queries run on other threads, outside any scope this thread
            # could open; it sees no tenant's rows (it enqueues through the current context).
            return None
        every_tenant = _needs_every_tenant(request)
        if op is None and not every_tenant:
            return None
        if org_id is not None and op is not None:
            return self._support_view(request, op, view_func, view_args, view_kwargs)
        # A view that raises leaves the block by the exception: the scope rolls back.
        with _scopes(op, every_tenant):
            response: HttpResponse = view_func(request, *view_args, **view_kwargs)
            # A template response queries as it renders (the admin's lists): in the scope too.
            render = getattr(response, "render", None)
            if callable(render):
                response = render()
        return response

    def _support_view(
        self,
        request: HttpRequest,
        op: OpContext,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse:
        """A support view's request: in the tenant's scope, told to ``support_seen`` in the
        same transaction; one refused (404, 403) is told too, in a transaction of its own (the
        view's rolled back)."""
        try:
            with _scopes(op, every_tenant=False):
                response: HttpResponse = view_func(request, *view_args, **view_kwargs)
                render = getattr(response, "render", None)
                if callable(render):
                    _support_banner(request)
                    response = render()
                support.request_seen(request, op, response.status_code)
        except Http404:
            support.request_seen(request, op, 404)
            raise
        except PermissionDenied:
            support.request_seen(request, op, 403)
            raise
        return response
