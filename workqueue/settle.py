"""What the holder of a claim does with the item: complete, fail, defer, release, extend.

Each is one statement conditioned on the item's ``claim_token`` (and status ``claimed``),
never on ``claimed_by``: one worker can hold one item twice across a requeue. No row changed
means the caller no longer holds the claim: ``Conflict``, and nothing changes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from audit.services import append as audit
from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from workqueue.db import fetch_system, run_scoped
from workqueue.exceptions import Conflict
from workqueue.kinds import get_kind
from workqueue.metrics import DEAD_LETTERED, STALE_WRITES
from workqueue.models import WorkItem
from workqueue.rules import is_exhausted, retry_delay

# (org_id, item_id, claim_token): what a batch write presents for each item.
Held = tuple[uuid.UUID, uuid.UUID, uuid.UUID]


def _one(transition: str, rows: list[WorkItem], item: WorkItem) -> WorkItem:
    if not rows:
        STALE_WRITES.labels(transition).inc()
        raise Conflict(
            f"{transition}: work item {item.id} is no longer held under this claim token"
        )
    return rows[0]


def _fence(item: WorkItem) -> dict[str, object]:
    return {"id": item.id, "claim_token": item.claim_token}


def complete(ctx: OpContext, item: WorkItem) -> WorkItem:
    """Mark the item done, if ``item.claim_token`` still holds it."""
    return _one("complete", run_scoped(ctx.org_id, "complete", _fence(item)), item)


def fail(ctx: OpContext, item: WorkItem, error: str, *, permanent: bool = False) -> WorkItem:
    """Requeue after ``retry_delay(attempts)``, or, when attempts are spent or the error is
    permanent, fail for good: a dead letter, with an audit entry in the same transaction and a
    metric. Conditioned on ``item.claim_token``.
    """
    if not (permanent or is_exhausted(item.attempts, item.max_attempts)):
        delay = retry_delay(item.attempts, get_kind(item.kind).retry)
        params = {**_fence(item), "delay_s": delay, "error": error[:10_000]}
        return _one("fail", run_scoped(ctx.org_id, "retry", params), item)
    with tenant_scope(ctx.org_id):
        params = {**_fence(item), "error": error[:10_000]}
        failed = _one("fail", run_scoped(ctx.org_id, "dead_letter", params), item)
        audit(
            ctx,
            "work.dead_lettered",
            failed,
            {
                "kind": failed.kind,
                "attempts": failed.attempts,
                "permanent": permanent,
                "error": error[:2000],
            },
        )
    DEAD_LETTERED.labels(failed.kind).inc()
    return failed


def defer(ctx: OpContext, item: WorkItem, delay_s: float, note: str = "deferred") -> WorkItem:
    """Hand the item back to run after ``delay_s``, giving back the attempt its claim spent."""
    params = {**_fence(item), "delay_s": max(float(delay_s), 0.0), "note": note}
    return _one("defer", run_scoped(ctx.org_id, "give_back", params), item)


def release(ctx: OpContext, item: WorkItem, note: str) -> WorkItem:
    """Hand the item back to run now (shutdown, a kind this worker does not handle), giving
    back the attempt its claim spent; ``note`` says why."""
    params = {**_fence(item), "delay_s": 0.0, "note": note}
    return _one("release", run_scoped(ctx.org_id, "give_back", params), item)


def extend_lease(ctx: OpContext, item: WorkItem, lease_s: float) -> WorkItem:
    """Push the lease to ``now() + lease_s``, if ``item.claim_token`` still holds the item."""
    params = {**_fence(item), "lease_s": float(lease_s)}
    return _one("extend_lease", run_scoped(ctx.org_id, "extend_lease", params), item)


def held_columns(held: Iterable[Held]) -> dict[str, list[uuid.UUID]]:
    rows = list(held)
    return {
        "org_ids": [h[0] for h in rows],
        "ids": [h[1] for h in rows],
        "tokens": [h[2] for h in rows],
    }


def complete_many(held: Iterable[Held]) -> set[uuid.UUID]:
    """Mark done every ``(org_id, id, claim_token)`` still held; returns the ids completed.

    An id missing from the result was refused (a stale holder). Runs on the system login
    across tenants because the token, with the org and the id, is the fence here: no row of
    another tenant can match a token minted for this claim.
    """
    columns = held_columns(held)
    if not columns["ids"]:
        return set()
    done = {row[0] for row in fetch_system("complete_many", columns)}
    refused = len(set(columns["ids"])) - len(done)
    if refused:
        STALE_WRITES.labels("complete").inc(refused)
    return done


def extend_leases(held: Iterable[Held], lease_s: float) -> set[uuid.UUID]:
    """Renew the lease of every ``(org_id, id, claim_token)`` still held; returns the ids renewed.

    Across tenants on the system login for the reason ``complete_many`` gives: the token is
    the fence.
    """
    columns = held_columns(held)
    if not columns["ids"]:
        return set()
    return {row[0] for row in fetch_system("extend_leases", {**columns, "lease_s": float(lease_s)})}
