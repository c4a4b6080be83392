"""What the admin's gauges page reads: the queue's figures, for the whole site or one tenant.

Each reading is a plan of one tenant-less statement. The operator's page runs it on the system
login, across tenants (``read_*``); a tenant's page runs the very same statement under that
tenant's row-level security (``read_*(org_id=...)``, through ``under_tenant``), so the figures a
tenant sees are computed from its own rows only, by the database, never filtered afterwards.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from workqueue import SQL_DIR
from workqueue.maintenance import Gauges, read_gauges_plan
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Step, System, Tenant, run


class ThroughputParams(NamedTuple):
    minutes: int


class HoldersParams(NamedTuple):
    limit: int


READ_THROUGHPUT = Statement("read_throughput", ThroughputParams, SQL_DIR)
READ_HOLDERS = Statement("read_holders", HoldersParams, SQL_DIR)


@dataclass(frozen=True)
class Holder:
    claimed_by: str
    items: int
    soonest_lease_end: datetime | None


def under_tenant(plan: Plan, org_id: uuid.UUID | None) -> Plan:
    """``plan`` with each system step run as a tenant step of ``org_id`` instead: a reading
    across tenants narrowed by row-level security to one tenant (``None``: unchanged)."""
    if org_id is None:
        return (yield from plan)
    try:
        step: Step = next(plan)
        while True:
            if isinstance(step, System):
                step = Tenant(org_id, step.statement, step.params)
            step = plan.send((yield step))
    except StopIteration as done:
        return done.value


def read_gauges_of(org_id: uuid.UUID | None = None) -> Gauges:
    """``read_gauges``' counts by lane, kind and status, oldest waiting age and failed count:
    for every tenant (system login) or, with ``org_id``, for that tenant only."""
    return run(under_tenant(read_gauges_plan(), org_id))


def read_throughput_plan(minutes: int) -> Plan:
    rows: Rows = yield System(READ_THROUGHPUT, ThroughputParams(int(minutes)))
    return [(minute, int(n)) for minute, n in rows.rows]


def read_throughput(
    minutes: int = 15, org_id: uuid.UUID | None = None
) -> list[tuple[datetime, int]]:
    """Items completed per minute, the last ``minutes`` minutes (the current one last, still
    counting), by the database clock. Completed items purged within that time are not counted."""
    return run(under_tenant(read_throughput_plan(max(1, min(int(minutes), 1440))), org_id))


def read_holders_plan(limit: int) -> Plan:
    rows: Rows = yield System(READ_HOLDERS, HoldersParams(int(limit)))
    return [Holder(who, int(n), lease) for who, n, lease in rows.rows]


def read_holders(limit: int = 50, org_id: uuid.UUID | None = None) -> list[Holder]:
    """Who holds claimed items (the ``claimed_by`` worker ids), how many each, most first."""
    return run(under_tenant(read_holders_plan(limit), org_id))


class NoFigureParams(NamedTuple):
    """``read_due_lanes`` takes none."""


READ_DUE_LANES = Statement("read_due_lanes", NoFigureParams, SQL_DIR)


@dataclass(frozen=True)
class DueLane:
    lane: str
    due: int
    oldest_age_s: float


def read_due_lanes_plan() -> Plan:
    rows: Rows = yield System(READ_DUE_LANES, NoFigureParams())
    return [DueLane(lane, int(n), float(age or 0.0)) for lane, n, age in rows.rows]


def read_due_lanes(org_id: uuid.UUID | None = None) -> list[DueLane]:
    """Per lane, the pending items already due and the oldest one's wait (at most 200 lanes):
    every tenant's (system login) or, with ``org_id``, that tenant's only."""
    return run(under_tenant(read_due_lanes_plan(), org_id))
