"""Tenancy's operations: the contexts work and maintenance run under."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from tenancy.contexts import SYSTEM_USER_ID, OpContext, RequestContext
from tenancy.exceptions import NotFound
from tenancy.models import Role
from tenancy.scope import SYSTEM_ALIAS

# claim_contexts: one row per asked (org, user): whether the org is live, and the user's live
# role in it. workqueue/sql/claim.sql spells the same lookup for its rows (one round trip per
# claim); tests/contract/test_claim_and_settle.py holds the two together.
CONTEXTS_SQL = """
SELECT a.org_id, a.user_id, o.id IS NOT NULL AND o.gone_at IS NULL, m.role
  FROM unnest(%(org_ids)s::uuid[], %(user_ids)s::uuid[]) AS a(org_id, user_id)
  LEFT JOIN tenancy_org o ON o.id = a.org_id
  LEFT JOIN tenancy_membership m
    ON m.org_id = a.org_id AND m.user_id = a.user_id AND m.ended_at IS NULL
"""


def service_context(rctx: RequestContext, org_id: uuid.UUID) -> OpContext:
    """The tenant's service context: the service role and the system user."""
    return OpContext(org_id=org_id, user_id=SYSTEM_USER_ID, role=Role.SERVICE, rctx=rctx)


def operator_context(rctx: RequestContext, org_id: uuid.UUID, user_id: uuid.UUID) -> OpContext:
    """The site's operator (a superuser, in the admin) acting in one tenant: the tenant of the
    rows they act on, their own user id (the audit entries name them), the admin role. Their
    writes then run under that tenant's row-level security like a member's."""
    return OpContext(org_id=org_id, user_id=user_id, role=Role.ADMIN, rctx=rctx)


def service_contexts(rctx: RequestContext) -> list[OpContext]:
    """One service context per live tenant, so a tenant whose members all left is still swept.

    Reads the org list, which is not a tenant table: it names the tenants.
    """
    from tenancy.models import Org

    org_ids = Org.objects.using(SYSTEM_ALIAS).live().order_by("id").values_list("id", flat=True)
    return [service_context(rctx, org_id) for org_id in org_ids]


def contexts_from_rows(
    rctx: RequestContext, rows: Iterable[Sequence[Any]]
) -> dict[tuple[uuid.UUID, uuid.UUID], OpContext | None]:
    found: dict[tuple[uuid.UUID, uuid.UUID], OpContext | None] = {}
    for org_id, user_id, live, role in rows:
        if not live:
            found[(org_id, user_id)] = None
        elif user_id == SYSTEM_USER_ID or role is None:
            found[(org_id, user_id)] = service_context(rctx, org_id)
        else:
            found[(org_id, user_id)] = OpContext(
                org_id=org_id, user_id=user_id, role=Role(role), rctx=rctx
            )
    return found


def claim_contexts(
    rctx: RequestContext, keys: Iterable[tuple[uuid.UUID, uuid.UUID]]
) -> dict[tuple[uuid.UUID, uuid.UUID], OpContext | None]:
    """The context for each ``(org_id, user_id)``, or None where the tenant is gone.

    One statement for a whole claim batch, on the system login: the claim runs across tenants,
    so no single tenant can be named.
    """
    pairs = list(dict.fromkeys(keys))
    if not pairs:
        return {}
    from django.db import connections

    params = {"org_ids": [p[0] for p in pairs], "user_ids": [p[1] for p in pairs]}
    with connections[SYSTEM_ALIAS].cursor() as cursor:
        cursor.execute(CONTEXTS_SQL, params)
        return contexts_from_rows(rctx, cursor.fetchall())


def claim_context(
    rctx: RequestContext,
    org_id: uuid.UUID,
    user_id: uuid.UUID,
    caused_by_request_id: uuid.UUID | None,
) -> OpContext:
    """The context claimed work runs under: its enqueuer's, or the tenant's service context.

    The enqueuer's context (their current role) while ``user_id`` holds a live membership; the
    tenant's service context when ``user_id`` is the system user or has left. Raises
    ``NotFound`` for a tenant that is gone: its work must not run.
    """
    ctx = claim_contexts(rctx, [(org_id, user_id)]).get((org_id, user_id))
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


def memberships_of(user_id: uuid.UUID) -> list[tuple[uuid.UUID, str]]:
    """The live ``(org_id, role)`` pairs of a signed-in user, oldest first.

    On the system login: the tenant is what this finds out, so none can be named yet.
    """
    from tenancy.models import Membership

    return list(
        Membership.objects.using(SYSTEM_ALIAS)
        .filter(user_id=user_id, ended_at__isnull=True, org__gone_at__isnull=True)
        .order_by("created_at")
        .values_list("org_id", "role")
    )
