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
from wqcore.store import Plan, Rows, Step, System, Tenant, transition


class HoldersParams(NamedTuple):
    limit: int


READ_HOLDERS = Statement("read_holders", HoldersParams, SQL_DIR)


@dataclass(frozen=True)
class Holder:
    claimed_by: str
    items: int
    soonest_lease_end: datetime | None


def under_tenant[T](plan: Plan[T], org_id: uuid.UUID | None) -> Plan[T]:
    """``plan`` with each system step run as a tenant step of ``org_id`` instead: a reading
    across tenants narrowed by row-level security to one tenant (``None``: unchanged)."""
    if org_id is None:
        return (yield from plan)
    try:
        step: Step = next(plan)
        while True:
            if isinstance(step, System):
                step = Tenant(org_id, step.statement, step.params)
            try:
                rows = yield step
            except BaseException as exc:  # raised in the plan, where it yielded the step
                step = plan.throw(exc)
            else:
                step = plan.send(rows)
    except StopIteration as done:
        result: T = done.value  # what the plan returned
        return result


@transition
def read_gauges_of(org_id: uuid.UUID | None = None) -> Plan[Gauges]:
    """``read_gauges``' counts by lane, kind and status, oldest waiting age and failed count:
    for every tenant (system login) or, with ``org_id``, for that tenant only."""
    return (yield from under_tenant(read_gauges_plan(), org_id))


def _holders(limit: int) -> Plan[list[Holder]]:
    rows: Rows = yield System(READ_HOLDERS, HoldersParams(int(limit)))
    return [Holder(who, int(n), lease) for who, n, lease in rows.rows]


@transition
def read_holders(limit: int = 50, org_id: uuid.UUID | None = None) -> Plan[list[Holder]]:
    """Who holds claimed items (the ``claimed_by`` worker ids), how many each, most first."""
    return (yield from under_tenant(_holders(limit), org_id))


class NoFigureParams(NamedTuple):
    """``read_due_lanes`` and ``read_due_kinds`` take none."""


READ_DUE_LANES = Statement("read_due_lanes", NoFigureParams, SQL_DIR)
READ_DUE_KINDS = Statement("read_due_kinds", NoFigureParams, SQL_DIR)


@dataclass(frozen=True)
class DueLane:
    lane: str
    due: int
    oldest_age_s: float


def _due_lanes() -> Plan[list[DueLane]]:
    rows: Rows = yield System(READ_DUE_LANES, NoFigureParams())
    return [DueLane(lane, int(n), float(age or 0.0)) for lane, n, age in rows.rows]


@transition
def read_due_lanes(org_id: uuid.UUID | None = None) -> Plan[list[DueLane]]:
    """Per lane, the pending items already due and the oldest one's wait (at most 200 lanes):
    every tenant's (system login) or, with ``org_id``, that tenant's only."""
    return (yield from under_tenant(_due_lanes(), org_id))


@dataclass(frozen=True)
class DueKind:
    lane: str
    kind: str
    due: int
    oldest_age_s: float


def _due_kinds() -> Plan[list[DueKind]]:
    rows: Rows = yield System(READ_DUE_KINDS, NoFigureParams())
    return [DueKind(lane, kind, int(n), float(age or 0.0)) for lane, kind, n, age in rows.rows]


@transition
def read_due_kinds(org_id: uuid.UUID | None = None) -> Plan[list[DueKind]]:
    """Per lane and kind, the pending items already due and the oldest one's wait (at most 500
    pairs): every tenant's (system login) or, with ``org_id``, that tenant's only."""
    return (yield from under_tenant(_due_kinds(), org_id))
