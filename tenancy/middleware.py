"""Build each request's contexts and run its view inside the tenant's scope."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from project.observability import current_traceparent
from tenancy import current
from tenancy.contexts import AppType, OpContext, RequestContext, new_request_context
from tenancy.models import Role
from tenancy.scope import tenant_scope
from tenancy.services import memberships_of

# A member of several orgs names one with this header (or the session's "org_id").
ORG_HEADER = "X-Org-ID"
SESSION_ORG = "org_id"


def _request_context(request: HttpRequest) -> RequestContext:
    rctx = new_request_context(AppType.WEB, traceparent=current_traceparent())
    given = request.headers.get("X-Request-ID", "")
    try:
        return RequestContext(rctx.app, uuid.UUID(given), rctx.traceparent) if given else rctx
    except ValueError:
        return rctx


def _op_context(request: HttpRequest, rctx: RequestContext) -> OpContext | None:
    """The signed-in member's context in the org they name (header, then session), else in
    their oldest org. Naming an org they are not a live member of is refused (403), never
    quietly replaced by another."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    memberships = memberships_of(user.pk)
    header = request.headers.get(ORG_HEADER)
    wanted = header or request.session.get(SESSION_ORG)
    if wanted:
        chosen = next((m for m in memberships if str(m[0]) == str(wanted)), None)
        if chosen is None:
            if header:
                # Named by its header: the API's answer names the field at fault.
                raise PermissionDenied(f"{ORG_HEADER}: you are not a member of org {header!r}")
            request.session.pop(SESSION_ORG, None)  # a stale choice: fall back below
            chosen = memberships[0] if memberships else None
    else:
        chosen = memberships[0] if memberships else None
    if chosen is None:
        return None
    return OpContext(org_id=chosen[0], user_id=user.pk, role=Role(chosen[1]), rctx=rctx)


class TenancyMiddleware:
    """Sets ``request.rctx`` always and ``request.op`` for a member, then runs the view (and
    renders its template response) inside ``tenant_scope(op.org_id)``. ``request.op`` is also
    the current context (``tenancy.current``) for the view, sync or async, and ends with the
    request: code handed no context (Django's ``Task.enqueue()``) finds the member's there.

    The scope wraps the view itself, as Django's ``ATOMIC_REQUESTS`` does, not the middleware
    chain: by the time a view's exception reaches a middleware, Django has turned it into a 500
    response, so a scope around ``get_response`` would commit a failed request's writes. List it
    last in ``MIDDLEWARE`` so every other ``process_view`` runs first.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rctx = _request_context(request)
        request.rctx = rctx  # type: ignore[attr-defined]
        request.op = None  # type: ignore[attr-defined]
        # process_view names the member's context; it ends here, whatever the view did.
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
        op = _op_context(request, request.rctx)  # type: ignore[attr-defined]
        request.op = op  # type: ignore[attr-defined]
        current.bind(op)  # ended by __call__ (an async view runs after this method returns)
        if op is None or inspect.iscoroutinefunction(view_func):
            # No tenant, or an async view (its queries run on other threads, outside any scope
            # this thread could open): the view sees no tenant's rows.
            return None
        # A view that raises leaves the block by the exception: the scope rolls back.
        with tenant_scope(op.org_id):
            response = view_func(request, *view_args, **view_kwargs)
            # A template response queries as it renders (the admin's lists): in the scope too.
            render = getattr(response, "render", None)
            if callable(render):
                response = render()
        return response
