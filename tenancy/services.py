"""Tenancy's operations for every tenancy: the contexts work and maintenance run under."""

from __future__ import annotations

import uuid

from tenancy.contexts import OpContext, RequestContext, Role, service_context
from tenancy.exceptions import NotFound
from tenancy.modes import current_tenancy

__all__ = ["claim_context", "operator_context", "service_context", "with_cause"]


def operator_context(rctx: RequestContext, org_id: uuid.UUID, user_id: str) -> OpContext:
    """The site's operator (a superuser, in the admin) acting in one tenant: the tenant of the
    rows they act on, their own actor (the audit entries name them), the admin role. Their
    writes then run under that tenant's row-level security like a member's."""
    return OpContext(org_id=org_id, user_id=user_id, role=Role.ADMIN, rctx=rctx)


def claim_context(
    rctx: RequestContext,
    org_id: uuid.UUID,
    user_id: str,
    caused_by_request_id: uuid.UUID | None,
) -> OpContext:
    """The context claimed work runs under: its author's, or the tenant's service context.

    The author's context (their current role) while the tenancy still knows them as one of the
    tenant's; the tenant's service context for the system actor or an author who left. Raises
    ``NotFound`` for a tenant that is gone: its work must not run.
    """
    actor = str(user_id)
    ctx = current_tenancy().contexts(rctx, [(org_id, actor)]).get((org_id, actor))
    if ctx is None:
        raise NotFound(f"tenant {org_id} does not exist or is gone")
    return with_cause(ctx, caused_by_request_id)


def with_cause(ctx: OpContext, caused_by_request_id: uuid.UUID | None) -> OpContext:
    """The same context, naming the request that caused the operation."""
    return OpContext(
        org_id=ctx.org_id,
        user_id=ctx.user_id,
        role=ctx.role,
        rctx=ctx.rctx,
        caused_by_request_id=caused_by_request_id,
    )
