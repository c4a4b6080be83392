"""The support view: a member of the site's staff looks at the admin as one tenant's staff do.

The site's operator (a superuser) or a viewer (``tenancy.roles``) picks a tenant on the admin's
support page; from then on, every admin request of that session runs as that tenant's staff:
its context names the tenant (the staff member as actor, the admin role), the tenancy
middleware runs the view inside the tenant's scope on the everyday login, and the fence
(``admin_fence``) reads nothing across tenants for them: every query is fenced by the tenant's
row-level security, as the tenant's own staff's are, and another tenant's item typed in the URL
is a 404. A viewer stays read-only there. Each admin request in a support view, and its
beginning and end, is told to ``support_seen`` inside the request's scope, whose receiver (the
audit app's) appends an entry naming the staff member (the actor) and the tenant (the entry's
tenant): the view cannot begin while nothing listens. Leaving it (the same page) returns the
session to normal; so does signing out (the session ends).

Outside the admin the session is the user's own: the support view is the admin's.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.dispatch import Signal
from django.http import HttpRequest

from tenancy.contexts import OpContext, RequestContext, Role, actor_of
from tenancy.roles import is_read_only

# Where the session keeps the tenant its support view shows.
SESSION_KEY = "workqueue_support_org_id"
# Sent for each thing done in a support view, inside its request's scope: ``ctx`` (the staff
# member in the tenant), ``action`` ("support.viewed", "support.acted", "support.began",
# "support.ended"), ``subject`` (a (type, id) pair) and ``data``.
support_seen = Signal()
# The views whose requests are not told (the admin's translations script, fetched by pages).
UNTOLD = frozenset({"jsi18n"})
# The most orgs the support page offers (by name).
ORGS_LISTED = 1_000


def may_support(user: Any) -> bool:
    """Whether ``user`` may take a support view: the site's operator or a viewer."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return bool(user.is_superuser) or is_read_only(user)


def chosen(request: HttpRequest) -> uuid.UUID | None:
    """The tenant this request's session views as support, if the user may (else None)."""
    session = getattr(request, "session", None)
    text = session.get(SESSION_KEY) if session is not None else None
    if not text or not may_support(getattr(request, "user", None)):
        return None
    try:
        return uuid.UUID(str(text))
    except ValueError:
        session.pop(SESSION_KEY, None)  # type: ignore[union-attr]
        return None


def support_context(request: HttpRequest, rctx: RequestContext, org_id: uuid.UUID) -> OpContext:
    """The staff member's context in the tenant viewed: the admin role, as its own staff's."""
    return OpContext(org_id=org_id, user_id=actor_of(request.user), role=Role.ADMIN, rctx=rctx)


def tell(ctx: OpContext, action: str, subject: tuple[str, object], data: dict[str, Any]) -> None:
    """Tell ``support_seen``'s receivers (the audit trail) what was done."""
    support_seen.send(sender=OpContext, ctx=ctx, action=action, subject=subject, data=data)


def request_seen(request: HttpRequest, ctx: OpContext, status: int) -> None:
    """Tell what this admin request of a support view was: a page viewed (a read), or an
    action taken (anything else), with its path, view and answer."""
    match = getattr(request, "resolver_match", None)
    view = match.url_name if match is not None else None
    if view in UNTOLD:
        return
    acted = request.method not in ("GET", "HEAD", "OPTIONS")
    data = {
        "tenant": str(ctx.org_id),
        "method": request.method,
        "path": request.get_full_path()[:1000],
        "view": view,
        "status": status,
    }
    if acted:
        data["posted"] = sorted(k for k in request.POST if k != "csrfmiddlewaretoken")[:50]
    tell(ctx, "support.acted" if acted else "support.viewed", ("admin.page", view or "-"), data)


def listened() -> bool:
    """Whether anything records a support view (the audit app's receiver)."""
    return support_seen.has_listeners(OpContext)


def begin(request: HttpRequest, org_id: uuid.UUID) -> None:
    """Begin a support view of ``org_id`` for this session (told as ``support.began``);
    refused (``PermissionDenied``) to a user who may not, or while nothing records it."""
    from django.core.exceptions import PermissionDenied

    if not may_support(getattr(request, "user", None)):
        raise PermissionDenied("the support view is for the site's operator and its viewers")
    if not listened():
        raise PermissionDenied(
            "the support view is audited, and nothing records it: add 'audit' to INSTALLED_APPS"
        )
    ctx = support_context(request, request.rctx, org_id)  # type: ignore[attr-defined]
    tell(ctx, "support.began", ("tenant", org_id), {"tenant": str(org_id)})
    request.session[SESSION_KEY] = str(org_id)


def end(request: HttpRequest) -> uuid.UUID | None:
    """End this session's support view (told as ``support.ended``); the tenant it showed, or
    None when there was none."""
    org_id = chosen(request)
    request.session.pop(SESSION_KEY, None)
    if org_id is not None:
        ctx = support_context(request, request.rctx, org_id)  # type: ignore[attr-defined]
        tell(ctx, "support.ended", ("tenant", org_id), {"tenant": str(org_id)})
    return org_id
