"""The orgs tenancy's lookups: a request's member context, the contexts claimed work runs
under, the live orgs. On the system login: the tenant is what these find out, so none can be
named while they read (orgs and memberships are read-only to the everyday login)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import connections
from django.http import HttpRequest

from tenancy.contexts import (
    OpContext,
    RequestContext,
    Role,
    actor_of,
    contexts_from_rows,
    service_context,
)
from wqcore.conf import system_alias

# A member of several orgs names one with this header (or the session's "org_id").
ORG_HEADER = "X-Org-ID"
SESSION_ORG = "org_id"

# lookup_contexts: one row per asked (org, actor): whether the org is live, and the actor's live
# role in it. tenancy/sql/claim_contexts_orgs.sql spells the same lookup for the claim's rows
# (one round trip per claim); tests/contract/test_claim_and_settle.py holds the two together.
CONTEXTS_SQL = """
SELECT a.org_id, a.actor, o.id IS NOT NULL AND o.gone_at IS NULL, m.role
  FROM unnest(%(org_ids)s::uuid[], %(actors)s::text[]) AS a(org_id, actor)
  LEFT JOIN workqueue_tenancy_org o ON o.id = a.org_id
  LEFT JOIN workqueue_tenancy_membership m
    ON m.org_id = a.org_id AND m.user_id::text = a.actor AND m.ended_at IS NULL
"""


def lookup_contexts(
    rctx: RequestContext, keys: Iterable[tuple[uuid.UUID, str]]
) -> dict[tuple[uuid.UUID, str], OpContext | None]:
    """The context for each ``(org_id, actor)``, or None where the org is gone; one statement
    for all of them."""
    pairs = list(dict.fromkeys(keys))
    if not pairs:
        return {}
    params: dict[str, list[uuid.UUID] | list[str]] = {
        "org_ids": [p[0] for p in pairs],
        "actors": [p[1] for p in pairs],
    }
    with connections[system_alias()].cursor() as cursor:
        cursor.execute(CONTEXTS_SQL, params)
        return contexts_from_rows(rctx, cursor.fetchall())


def memberships_of(user_id: Any) -> list[tuple[uuid.UUID, str]]:
    """The live ``(org_id, role)`` pairs of a signed-in user (``user_id``: the key of the
    site's user model, of whatever type it has there), oldest first."""
    from tenancy.models import Membership

    return list(
        Membership.objects.using(system_alias())
        .filter(user_id=user_id, ended_at__isnull=True, org__gone_at__isnull=True)
        .order_by("created_at")
        .values_list("org_id", "role")
    )


def member_context(request: HttpRequest, rctx: RequestContext) -> OpContext | None:
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
    return OpContext(org_id=chosen[0], user_id=actor_of(user), role=Role(chosen[1]), rctx=rctx)


def service_contexts(rctx: RequestContext) -> list[OpContext]:
    """One service context per live org, so an org whose members all left is still served."""
    from tenancy.models import Org

    org_ids = Org.objects.using(system_alias()).live().order_by("id").values_list("id", flat=True)
    return [service_context(rctx, org_id) for org_id in org_ids]
