"""Sweep step: hand back the items of workers whose process is gone, without waiting for their
lease.

A worker holds a liveness lock (``workers/liveness_lock.py``): a session-level advisory lock
that PostgreSQL frees the moment the worker's session ends, as it does when its process dies.
One statement across tenants (``find_gone_holders``, on the system login) finds the workers
whose lock no session holds and marks each with when that was first seen; a worker seen so
again at least ``SWEEP_RESCUE_GRACE_S`` later is gone (a live worker whose liveness session
failed has fenced itself well before: it checks its session every ``WORKER_LIVENESS_CHECK_S``),
and the items it claimed before that look are handed back under each tenant's service context,
as an expired lease's are (``requeue_held``: the attempt spent, a dead letter once attempts are
spent, cancelled when someone asked, the attempt recorded as ``holder_gone``, the signals sent).
A gone worker that holds nothing more has its lock forgotten. A worker that holds no lock (an
older release, ``WORKER_LIVENESS_LOCK`` off) is never found here: its items wait for their lease.

The marks are the database's (its clock, in the workers' rows), so any sweeper's look counts,
and running the step twice at once hands nothing back twice (each item is locked ``SKIP
LOCKED`` and changed only while claimed). It runs first in each pass, and on a timer of its own
(``SWEEP_RESCUE_INTERVAL_S``), without the sweep's mutex: it is idempotent and the mutex would
cost more than the step.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from tenancy.contexts import RequestContext, service_context
from workers.sweep.config import SweepSettings
from workqueue import runtime
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import System, execute

logger = logging.getLogger(__name__)


class FindParams(NamedTuple):
    grace_s: float


FIND_GONE_HOLDERS = Statement("find_gone_holders", FindParams, Path(__file__).parents[1] / "sql")


class Rescued(NamedTuple):
    # Workers first seen without their lock in this pass, and gone ones forgotten.
    marked: int = 0
    forgotten: int = 0
    # Workers whose items were handed back, and what became of the items.
    holders: int = 0
    requeued: int = 0
    dead_lettered: int = 0
    cancelled: int = 0


class Found(NamedTuple):
    marked: int
    forgotten: int
    # The database's clock at the look: only items claimed before it are handed back.
    seen_at: datetime
    # Each tenant's gone holders.
    holders: dict[uuid.UUID, list[str]]


def find_gone(grace_s: float) -> Found:
    """Mark the workers newly seen without their lock, forget those gone with nothing held, and
    return the tenants of what those gone for ``grace_s`` hold. Takes no tenant: which workers
    are gone is read across tenants, on the system login; the hand-back is each tenant's."""
    rows = execute(System(FIND_GONE_HOLDERS, FindParams(float(grace_s)))).rows
    holders: dict[uuid.UUID, list[str]] = defaultdict(list)
    for _, _, _, holder, org_id in rows:
        if holder is not None:
            holders[org_id].append(holder)
    marked, forgotten, seen_at = rows[0][:3]
    return Found(int(marked), int(forgotten), seen_at, dict(holders))


def run_once(rctx: RequestContext, settings: SweepSettings) -> Rescued:
    found = find_gone(settings.rescue_grace_s)
    requeued = dead = cancelled = 0
    for org_id, holders in found.holders.items():
        ctx = service_context(rctx, org_id)
        for _ in range(settings.max_batches):
            moved = runtime.requeue_held(ctx, holders, found.seen_at, limit=settings.batch)
            for item in moved.items:
                runtime.send_settled(item, item.last_error, None, "")
            requeued, dead = requeued + moved.requeued, dead + moved.dead_lettered
            cancelled += moved.cancelled
            if moved.requeued + moved.dead_lettered + moved.cancelled < settings.batch:
                break  # a short batch: these holders hold no more of this tenant's items
    gone = sorted({h for holders in found.holders.values() for h in holders})
    if gone:
        log_event(
            logger,
            logging.INFO,
            "holders_gone",
            workers=",".join(gone),
            requeued=requeued,
            dead_lettered=dead,
            cancelled=cancelled,
        )
    return Rescued(found.marked, found.forgotten, len(gone), requeued, dead, cancelled)
