"""Where each schedule stands (``workers.models.ScheduleState``), and its transitions.

Each is one named statement on the system login (the rows belong to no tenant: a schedule of
every tenant has one), by the database's clock. A tick is claimed by a compare-and-set on the
tick the sweeper read (``claim_tick``), so of any number of sweepers one claims it; its items
are then enqueued with the tick in their idempotency key, and the tick is marked delivered
(``tick_done``). A sweeper that dies between the two leaves the tick claimed but not
delivered: the next pass enqueues it again, and the key makes what was already enqueued a
``KEY_EXISTS``. Pausing and resuming append an audit entry in every tenant the schedule
serves, naming the operator, in the same statement.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from audit.api import APPEND_ENTRIES
from tenancy.contexts import RequestContext
from wqcore.statements import NoParams, Statement
from wqcore.store import System, execute

SQL_DIR = Path(__file__).with_name("sql")


@dataclass(frozen=True)
class State:
    """One schedule's row as read."""

    name: str
    last_tick: datetime | None
    delivered: bool
    last_enqueued_tick: datetime | None
    skipped: int
    enqueued: int
    paused: bool
    changed_by: str
    updated_at: datetime | None


class StartParams(NamedTuple):
    name: str
    # The latest due tick: the schedule's first item is the one after it.
    tick: datetime


class ClaimTickParams(NamedTuple):
    name: str
    # The tick the sweeper read (the fence).
    seen: datetime
    tick: datetime
    # Ticks strictly between ``seen`` and ``tick``, never enqueued.
    skipped: int


class TickDoneParams(NamedTuple):
    name: str
    tick: datetime
    # False: the tick's item was refused (InvalidPayload): it counts as skipped.
    enqueued: bool


class PauseParams(NamedTuple):
    name: str
    # The operator, and the tenants whose audit trail records it.
    actor: str
    request_id: uuid.UUID
    org_ids: list[uuid.UUID]
    # Where the operator acted from (``manage.py schedules``, the admin), for the entry.
    via: str


READ_SCHEDULES = Statement("read_schedules", NoParams, SQL_DIR)
START_SCHEDULE = Statement("start_schedule", StartParams, SQL_DIR)
CLAIM_TICK = Statement("claim_tick", ClaimTickParams, SQL_DIR)
TICK_DONE = Statement("tick_done", TickDoneParams, SQL_DIR)
PAUSE_SCHEDULE = Statement("pause_schedule", PauseParams, SQL_DIR, includes=(APPEND_ENTRIES,))
RESUME_SCHEDULE = Statement("resume_schedule", PauseParams, SQL_DIR, includes=(APPEND_ENTRIES,))
# Embedded in the gauges' one statement (workers/gauges.py).
READ_SCHEDULE_GAUGES = Statement("read_schedule_gauges", NoParams, SQL_DIR)


def read_states() -> tuple[datetime, dict[str, State]]:
    """The database's ``now()`` and every schedule's state, in one statement. Takes no tenant:
    the rows belong to none."""
    rows = execute(System(READ_SCHEDULES, NoParams())).rows
    now = rows[0][0]
    states = {row[1]: State(*row[1:]) for row in rows if row[1] is not None}
    return now, states


def start(name: str, tick: datetime) -> bool:
    """Start a new (or just resumed) schedule at ``tick`` without enqueuing it; False when it
    has a tick already or is paused."""
    return bool(execute(System(START_SCHEDULE, StartParams(name, tick))).rows)


def claim_tick(name: str, seen: datetime, tick: datetime, skipped: int) -> bool:
    """Claim ``tick`` from ``seen`` (the compare-and-set); False when another sweeper moved
    the schedule on first, or it is paused, or its claimed tick is not delivered yet."""
    params = ClaimTickParams(name, seen, tick, skipped)
    return bool(execute(System(CLAIM_TICK, params)).rows)


def tick_done(name: str, tick: datetime, *, enqueued: bool = True) -> bool:
    """Close the claimed ``tick``: its items are all enqueued (or, ``enqueued=False``, it was
    refused and counts as skipped); False when it was closed already."""
    return bool(execute(System(TICK_DONE, TickDoneParams(name, tick, enqueued))).rows)


def pause(name: str, *, actor: str, rctx: RequestContext, via: str) -> State | None:
    """Pause the declared schedule ``name``, audited (as ``actor``) in every tenant it serves;
    None when it was paused already. ``LookupError`` when no schedule of that name is
    declared."""
    return _set(PAUSE_SCHEDULE, name, actor, rctx, via)


def resume(name: str, *, actor: str, rctx: RequestContext, via: str) -> State | None:
    """Resume ``name`` from its next tick, audited in every tenant it serves; None when it was
    not paused."""
    return _set(RESUME_SCHEDULE, name, actor, rctx, via)


def _set(
    statement: Statement, name: str, actor: str, rctx: RequestContext, via: str
) -> State | None:
    from workers.schedules import get_schedule, tenants_of

    schedule = get_schedule(name)
    org_ids = [ctx.org_id for ctx in tenants_of(schedule, rctx)]
    params = PauseParams(name, actor, rctx.request_id, org_ids, via)
    rows = execute(System(statement, params)).rows
    if not rows:
        return None
    return read_states()[1].get(name)
