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
Between the look and each hand-back the holders are looked at again (``still_gone``, in the
hand-back's transaction, their rows locked): a worker that took a new lock in between (a
blip: its liveness session was cut and it reconnected) keeps its items, and its handlers that
it found still holding their claims go on (``workers/liveness_lock.py``). A gone worker that
holds nothing more has its lock forgotten. A worker that holds no lock (an
older release, ``WORKER_LIVENESS_LOCK`` off) is never found here: its items wait for their lease.

The marks are the database's (its clock, in the workers' rows), so any sweeper's look counts,
and running the step twice at once hands nothing back twice (each item is locked ``SKIP
LOCKED`` and changed only while claimed). It runs first in each pass, and on a timer of its own
(``SWEEP_RESCUE_INTERVAL_S``), without the sweep's mutex: it is idempotent and the mutex would
cost more than the step. The fleet's timers take turns (``RescueTurn``, in the same statement):
about one look an interval between them, however many workers sweep.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from django.db import transaction

from tenancy.contexts import RequestContext, service_context
from workers.sweep.config import SweepSettings
from workqueue import runtime
from wqcore.conf import system_alias
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import System, execute

logger = logging.getLogger(__name__)


class FindParams(NamedTuple):
    grace_s: float
    # 0: look now. Else look only if no look was taken in the last turn_s seconds.
    turn_s: float


class StillParams(NamedTuple):
    holders: list[str]
    seen_at: datetime
    grace_s: float


FIND_GONE_HOLDERS = Statement("find_gone_holders", FindParams, Path(__file__).parents[1] / "sql")
STILL_GONE = Statement("still_gone", StillParams, Path(__file__).parents[1] / "sql")


class Rescued(NamedTuple):
    # Workers first seen without their lock in this pass, and gone ones forgotten.
    marked: int = 0
    forgotten: int = 0
    # Workers whose items were handed back, and what became of the items.
    holders: int = 0
    requeued: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    # Workers that held a liveness lock at the last look (this one's, or another's).
    fleet: int = 0
    # Workers found gone that had taken a new lock by the hand-back: they keep their items.
    back: int = 0


class Found(NamedTuple):
    marked: int
    forgotten: int
    # The database's clock at the look: only items claimed before it are handed back.
    seen_at: datetime
    fleet: int
    # Each tenant's gone holders.
    holders: dict[uuid.UUID, list[str]]


def find_gone(grace_s: float, turn_s: float = 0.0) -> Found:
    """Mark the workers newly seen without their lock, forget those gone with nothing held, and
    return the tenants of what those gone for ``grace_s`` hold. Takes no tenant: which workers
    are gone is read across tenants, on the system login; the hand-back is each tenant's.
    ``turn_s``: look only when no look was taken in that many seconds (else find nothing)."""
    rows = execute(System(FIND_GONE_HOLDERS, FindParams(float(grace_s), float(turn_s)))).rows
    holders: dict[uuid.UUID, list[str]] = defaultdict(list)
    for *_, holder, org_id in rows:
        if holder is not None:
            holders[org_id].append(holder)
    marked, forgotten, seen_at, fleet = rows[0][:4]
    return Found(int(marked), int(forgotten), seen_at, int(fleet), dict(holders))


# A timer takes the turn once this share of its interval has passed since the last look: the
# fleet's timers are not in step, and a turn asked for a moment early must not wait a whole
# interval more.
TURN_SHARE = 0.8
# How many asks an interval the fleet makes between them: each worker asks every
# fleet / ASKS intervals, so asks refused at the turn stay few however large the fleet. At most
# every MAX_SPREAD intervals: the fleet counts every worker with a lock, and where only some of
# them sweep, those few must still ask often enough.
ASKS = 4
MAX_SPREAD = 8


def ask_delay_s(settings: SweepSettings, rescued: Rescued | None) -> float:
    """When a worker's timer asks again, after an ask that found ``rescued`` (None: it failed),
    spread at random a quarter either way so the fleet's timers do not fall in step."""
    fleet = rescued.fleet if rescued is not None else 0
    spread = min(float(MAX_SPREAD), max(1.0, fleet / ASKS))
    return settings.rescue_interval_s * spread * random.uniform(0.75, 1.25)


def run_once(rctx: RequestContext, settings: SweepSettings) -> Rescued:
    """The rescue as a step of a sweep pass (one sweeper at a time): it always looks."""
    return _rescue(rctx, settings, find_gone(settings.rescue_grace_s))


def run_on_timer(rctx: RequestContext, settings: SweepSettings) -> Rescued:
    """The rescue on a worker's own timer: it looks when its turn comes (``RescueTurn``)."""
    turn_s = settings.rescue_interval_s * TURN_SHARE
    return _rescue(rctx, settings, find_gone(settings.rescue_grace_s, turn_s))


def still_gone(holders: list[str], seen_at: datetime, grace_s: float) -> list[str]:
    """Those of ``holders`` found gone at ``seen_at`` that still are (their row names the lock
    seen lost, and no session holds it), their rows locked until the caller's transaction ends:
    a worker taking a new lock meanwhile waits for that (``still_gone.sql``). Takes no tenant:
    the workers' rows are read across tenants, on the system login."""
    rows = execute(System(STILL_GONE, StillParams(list(holders), seen_at, float(grace_s)))).rows
    return [str(row[0]) for row in rows]


def _rescue(rctx: RequestContext, settings: SweepSettings, found: Found) -> Rescued:
    requeued = dead = cancelled = 0
    back: set[str] = set()
    for org_id, holders in found.holders.items():
        ctx = service_context(rctx, org_id)
        for _ in range(settings.max_batches):
            # The re-check and the hand-back in one transaction of the system login's: the rows
            # it locks are the ones a worker's new lock must update, so a worker is either seen
            # back here or takes its lock after the hand-back committed (and then finds its
            # claims gone). Without it, one that came back between the look and this would
            # keep running what is handed to another.
            with transaction.atomic(using=system_alias()):
                still = still_gone(holders, found.seen_at, settings.rescue_grace_s)
                back.update(set(holders) - set(still))
                holders = still
                if not holders:
                    break
                moved = runtime.requeue_held(ctx, holders, found.seen_at, limit=settings.batch)
            for item in moved.items:
                runtime.send_settled(item, item.last_error, None, "")
            requeued, dead = requeued + moved.requeued, dead + moved.dead_lettered
            cancelled += moved.cancelled
            if moved.requeued + moved.dead_lettered + moved.cancelled < settings.batch:
                break  # a short batch: these holders hold no more of this tenant's items
    gone = sorted({h for holders in found.holders.values() for h in holders} - back)
    if gone or back:
        log_event(
            logger,
            logging.INFO,
            "holders_gone",
            workers=",".join(gone),
            requeued=requeued,
            dead_lettered=dead,
            cancelled=cancelled,
            back=",".join(sorted(back)),
        )
    return Rescued(
        found.marked,
        found.forgotten,
        len(gone),
        requeued,
        dead,
        cancelled,
        found.fleet,
        len(back),
    )
