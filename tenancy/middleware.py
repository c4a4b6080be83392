"""Build each request's contexts and run its view inside the tenant's scope."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.http import HttpRequest, HttpResponse

from tenancy import current
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


def _is_operator(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(user and user.is_active and user.is_superuser)


def _in_admin(request: HttpRequest) -> bool:
    match = getattr(request, "resolver_match", None)
    return bool(match and "admin" in match.namespaces)


def _needs_every_tenant(request: HttpRequest) -> bool:
    """The operator's admin pages on a system login without BYPASSRLS (one login that owns the
    tables): they read across tenants, explicitly, inside a system scope."""
    return _is_operator(request) and _in_admin(request) and not bypasses_rls(system_alias())


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
        op = current_tenancy().request_context(request, request.rctx)  # type: ignore[attr-defined]
        request.op = op  # type: ignore[attr-defined]
        current.bind(op)  # ended by __call__ (an async view runs after this method returns)
        if inspect.iscoroutinefunction(view_func):
            # An async view: its queries run on other threads, outside any scope this thread
            # could open; it sees no tenant's rows (it enqueues through the current context).
            return None
        every_tenant = _needs_every_tenant(request)
        if op is None and not every_tenant:
            return None
        # A view that raises leaves the block by the exception: the scope rolls back.
        with _scopes(op, every_tenant):
            response: HttpResponse = view_func(request, *view_args, **view_kwargs)
            # A template response queries as it renders (the admin's lists): in the scope too.
            render = getattr(response, "render", None)
            if callable(render):
                response = render()
        return response
