"""Build each request's contexts and run its view inside the tenant's scope."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from project.observability import current_traceparent
from tenancy.contexts import AppType, OpContext, RequestContext, new_request_context
from tenancy.models import Role
from tenancy.scope import tenant_scope
from tenancy.services import memberships_of

# A client may choose among its orgs with this header (or the session's "org_id").
ORG_HEADER = "HTTP_X_ORG_ID"


def _request_context(request: HttpRequest) -> RequestContext:
    rctx = new_request_context(AppType.WEB, traceparent=current_traceparent())
    given = request.headers.get("X-Request-ID")
    try:
        return RequestContext(rctx.app, uuid.UUID(given), rctx.traceparent) if given else rctx
    except ValueError:
        return rctx


def _op_context(request: HttpRequest, rctx: RequestContext) -> OpContext | None:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    memberships = memberships_of(user.pk)
    if not memberships:
        return None
    wanted = request.META.get(ORG_HEADER) or request.session.get("org_id")
    chosen = next((m for m in memberships if str(m[0]) == wanted), memberships[0])
    return OpContext(org_id=chosen[0], user_id=user.pk, role=Role(chosen[1]), rctx=rctx)


class TenancyMiddleware:
    """Sets ``request.rctx`` always and ``request.op`` for a member, then scopes the view.

    A member's view runs inside ``tenant_scope(org)``: one transaction whose row-level security
    setting ends with it, so a pooled connection never carries a tenant into the next request.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rctx = _request_context(request)
        request.rctx = rctx  # type: ignore[attr-defined]
        op = _op_context(request, rctx)
        request.op = op  # type: ignore[attr-defined]
        if op is None:
            return self.get_response(request)
        with tenant_scope(op.org_id):
            return self.get_response(request)
