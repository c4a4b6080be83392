"""claim: hand pending work to a worker, across tenants, each item under a fresh claim token."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

from tenancy.contexts import OpContext, RequestContext
from tenancy.scope import SYSTEM_ALIAS
from tenancy.services import contexts_from_rows, with_cause
from workqueue.db import fetch_system_columns, items_from_rows, run_system
from workqueue.exceptions import Conflict
from workqueue.metrics import ORPHANED
from workqueue.models import WorkItem

logger = logging.getLogger(__name__)

ORPHAN_ERROR = "tenant is gone"


def claim_params(
    lane: str, kinds: Sequence[str] | None, worker_id: str, lease_s: float, limit: int
) -> dict[str, Any]:
    """The parameters of ``sql/claim.sql``."""
    return {
        "lane": lane,
        "any_kind": kinds is None,
        "kinds": list(kinds or []),
        "worker_id": worker_id,
        "lease_s": float(lease_s),
        "limit": int(limit),
    }


def hand_out(
    rctx: RequestContext, names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[list[tuple[OpContext, WorkItem]], list[WorkItem]]:
    """Pair each claimed row with the context it runs under, in the order the claim picked
    them; items whose tenant is gone come back separately, to be failed as orphans.

    The claim's rows carry ``tenancy_live`` and ``tenancy_role``, which tenancy turns into the
    context (``contexts_from_rows``), as ``claim_context`` would.
    """
    items = items_from_rows(SYSTEM_ALIAS, names, rows)
    live, role = names.index("tenancy_live"), names.index("tenancy_role")
    contexts = contexts_from_rows(
        rctx,
        [
            (i.org_id, i.created_by, row[live], row[role])
            for i, row in zip(items, rows, strict=True)
        ],
    )
    # RETURNING keeps no order; hand items out in the order the claim picked them.
    items.sort(key=lambda i: (-i.priority, i.available_at, i.id))
    claimed, orphans = [], []
    for item in items:
        ctx = contexts.get((item.org_id, item.created_by))
        if ctx is None:
            orphans.append(item)
        else:
            claimed.append((with_cause(ctx, item.request_id), item))
    return claimed, orphans


def count_orphan(item: WorkItem) -> None:
    ORPHANED.labels(item.kind).inc()
    logger.warning("work_orphaned item=%s org=%s kind=%s", item.id, item.org_id, item.kind)


def claim(
    rctx: RequestContext,
    lane: str,
    kinds: Sequence[str] | None,
    worker_id: str,
    lease_s: float,
    limit: int = 1,
) -> list[tuple[OpContext, WorkItem]]:
    """Claim up to ``limit`` due pending items of ``lane`` (and ``kinds``; None for any kind).

    One statement locks the items with ``FOR UPDATE SKIP LOCKED`` (priority, then age), mints a
    claim token each, sets ``lease_expires_at = now() + lease_s`` and spends one attempt, counted
    here so a worker that dies on a poison item still runs out of attempts. Each item comes
    with the context tenancy builds for it (``contexts_from_rows``): its enqueuer's, or its tenant's
    service context, naming the item's request as the cause, read by the same statement (one
    round trip). An item whose tenant is gone is failed by ``fail_orphaned``, never returned.

    Takes no tenant: a worker serves every tenant's queue, so the claim reads across tenants on
    the system login, and each item comes back with the tenant it belongs to.
    """
    if limit < 1:
        return []
    names, rows = fetch_system_columns(
        "claim", claim_params(lane, kinds, worker_id, lease_s, limit)
    )
    if not rows:
        return []
    claimed, orphans = hand_out(rctx, names, rows)
    for item in orphans:
        try:
            fail_orphaned(item.id, item.claim_token, ORPHAN_ERROR)
        except Conflict:
            pass  # another sweep or claimer got to it first; either way it does not run
        count_orphan(item)
    return claimed


def fail_orphaned(item_id: uuid.UUID, claim_token: uuid.UUID | None, error: str) -> WorkItem:
    """Fail for good an item whose tenant is gone, if ``claim_token`` still holds it.

    Takes no tenant: the tenant is gone, so no tenant context can be built for it; the claim
    token is the fence. No audit entry, since no tenant is left to hold one.
    """
    rows = run_system("dead_letter", {"id": item_id, "claim_token": claim_token, "error": error})
    if not rows:
        raise Conflict(f"work item {item_id} is no longer held under this claim token")
    return rows[0]
