"""Whose rows an admin page covers and whom its writes name: the operator (every tenant, on
the system login) or a tenant's staff (their tenant, under its row-level security). The rule
itself is ``tenancy.admin_fence``'s; this is what the queue's pages ask of it."""

from __future__ import annotations

import uuid

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from tenancy.admin_fence import is_operator, sees_every_tenant, tenant_staff
from tenancy.contexts import OpContext
from tenancy.modes import current_tenancy
from tenancy.services import operator_context


def tenants_have_names() -> bool:
    """Whether the tenants are the tenancy app's orgs (which have names to show)."""
    return current_tenancy().name == "orgs"


def scope_of(request: HttpRequest) -> uuid.UUID | None:
    """Whose rows a reading of the admin covers: every tenant's for the operator (``None``: on
    the system login; a viewer's too), else the staff member's tenant (under its row-level
    security; in a support view, the tenant viewed)."""
    if sees_every_tenant(request):
        return None
    staff = tenant_staff(request)
    if staff is None:
        raise PermissionDenied("the queue's admin is for the site's operator and tenant staff")
    return staff.org_id


def actor_in(request: HttpRequest, org_id: uuid.UUID) -> OpContext:
    """Whom the audit entries name, in the tenant acted on: a tenant's staff act as
    themselves in their tenant; the operator in the tenant of the items."""
    staff = tenant_staff(request)
    if staff is not None and not is_operator(request):
        return staff
    # The request's context is the tenancy middleware's, set on every admin request.
    rctx = request.rctx  # type: ignore[attr-defined]
    return operator_context(rctx, org_id, str(request.user.pk))
