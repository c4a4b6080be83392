"""The sweep's operations on work items: requeue stale claims, purge old items, read gauges."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from audit.services import append as audit
from tenancy.contexts import OpContext, RequestContext
from tenancy.scope import tenant_scope
from tenancy.services import service_contexts
from workqueue.db import fetch_system, run_scoped
from workqueue.metrics import DEAD_LETTERED
from workqueue.models import Status

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Requeued:
    requeued: int
    dead_lettered: int


def requeue_stale(ctx: OpContext, before: datetime | None = None, limit: int = 1000) -> Requeued:
    """Hand back the tenant's claimed items whose lease passed before ``before`` (default: the
    database's ``now()``), at most ``limit``. One whose attempts are spent is dead-lettered
    instead, with an audit entry, so a poison item that crashes its worker every time ends.
    """
    with tenant_scope(ctx.org_id):
        moved = run_scoped(ctx.org_id, "requeue_stale", {"before": before, "limit": int(limit)})
        dead = [item for item in moved if item.status == Status.FAILED]
        for item in dead:
            audit(
                ctx,
                "work.dead_lettered",
                item,
                {"kind": item.kind, "attempts": item.attempts, "error": item.last_error},
            )
    for item in dead:
        DEAD_LETTERED.labels(item.kind).inc()
    result = Requeued(requeued=len(moved) - len(dead), dead_lettered=len(dead))
    if moved:
        logger.info(
            "stale_requeued org=%s requeued=%d dead_lettered=%d",
            ctx.org_id,
            result.requeued,
            result.dead_lettered,
        )
    return result


def purge_items(
    rctx: RequestContext, before: datetime, batch: int = 1000, max_batches: int = 100
) -> int:
    """Delete done and failed items last changed before ``before``, in every tenant; returns
    how many. Bounded: batches of ``batch``, at most ``max_batches`` per call; it stops early
    when a batch comes back smaller than ``batch`` (nothing more is old enough).

    Takes no tenant: retention is the operator's rule for the whole table, and one statement
    per batch across tenants is what keeps the purge cheap; runs on the system login.
    """
    total = 0
    for _ in range(max_batches):
        deleted = fetch_system("purge_items", {"before": before, "batch": int(batch)})[0][0]
        total += deleted
        if deleted < batch:
            break
    if total:
        logger.info("items_purged count=%d before=%s", total, before.isoformat())
    return total


@dataclass(frozen=True)
class Gauges:
    # Seconds the oldest due pending item has waited (0 when none waits).
    oldest_age_s: float
    failed: int
    # (lane, kind, status) -> count
    counts: dict[tuple[str, str, str], int] = field(default_factory=dict)


def read_gauges(rctx: RequestContext) -> Gauges:
    """The queue's gauges in one statement: the oldest waiting item's age, the failed count,
    and counts by lane, kind and status.

    Takes no tenant: the gauges describe the whole queue for the operator, so they read across
    tenants on the system login.
    """
    rows = fetch_system("read_gauges", {})
    counts = {(lane, kind, status): n for lane, kind, status, n, _ in rows}
    ages = [float(age) for *_, age in rows if age is not None]
    return Gauges(
        oldest_age_s=max(ages, default=0.0),
        failed=sum(n for (_, _, status), n in counts.items() if status == Status.FAILED),
        counts=counts,
    )


def maintenance_contexts(rctx: RequestContext) -> list[OpContext]:
    """One service context per live tenant, for the sweep's per-tenant steps."""
    return service_contexts(rctx)
