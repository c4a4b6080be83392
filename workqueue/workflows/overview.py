"""A workflow as an operator reads it: its steps page by page, how many are in each status, the
steps that hold the rest up, its callbacks; and, for dead letters, what each one holds up.

Each reading is one statement, bounded whatever the workflow's size: a page of steps is read
from ``WorkflowStep``'s key, the counts from the items' workflow index (done steps are the rest:
that index holds none of them), and every count of edges stops at ``COUNT_CAP``. Each is a plan
of system steps: the operator's reads run on the system login across tenants, a tenant's staff's
under their tenant's row-level security (``scope``, as the gauges' figures do); both name the
workflow's tenant, so a row another tenant planted is never read as the workflow's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from workqueue import SQL_DIR
from workqueue.figures import under_tenant
from workqueue.models import Status
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, transition

# The most steps a page shows, and the most of each step's parents it names.
PAGE_MAX = 500
PARENTS_SHOWN = 5
# Counts of edges stop here (a callback of 100,000 members says "more than 10,000").
COUNT_CAP = 10_000
# The most blockers and callbacks a page lists, and the cancelled or discarded steps it looks
# through for blockers.
LISTED = 50
SCAN = 1_000
# A result's preview: its first characters, read only when it is stored at most this large.
PREVIEW_CHARS = 120
PREVIEW_BYTES = 8_192
# Before every id: the first page starts after it.
_FIRST = uuid.UUID(int=0)


class _Workflow(NamedTuple):
    org_id: uuid.UUID
    workflow_id: uuid.UUID


class StepsParams(NamedTuple):
    org_id: uuid.UUID
    workflow_id: uuid.UUID
    after: uuid.UUID
    limit: int
    cap: int
    parents_shown: int
    preview: int
    preview_bytes: int


class BlockersParams(NamedTuple):
    org_id: uuid.UUID
    workflow_id: uuid.UUID
    limit: int
    scan: int
    cap: int


class CallbacksParams(NamedTuple):
    org_id: uuid.UUID
    workflow_id: uuid.UUID
    limit: int
    cap: int


class HoldingParams(NamedTuple):
    ids: list[uuid.UUID]
    cap: int


READ_STEPS = Statement("read_workflow_steps", StepsParams, SQL_DIR)
READ_COUNTS = Statement("read_workflow_counts", _Workflow, SQL_DIR)
READ_BLOCKERS = Statement("read_workflow_blockers", BlockersParams, SQL_DIR)
READ_CALLBACKS = Statement("read_workflow_callbacks", CallbacksParams, SQL_DIR)
READ_HOLDING = Statement("read_holding", HoldingParams, SQL_DIR)


class ParentRef(NamedTuple):
    """An item a step waits for: its id, what the step needs of it, its status (None: purged)
    and its place in the workflow (None: an item outside it, or a step whose place was not
    kept)."""

    id: uuid.UUID
    needs: str
    status: str | None
    place: int | None


class StepRow(NamedTuple):
    place: int | None
    callback: str | None
    id: uuid.UUID
    kind: str
    lane: str
    status: str
    attempts: int
    max_attempts: int
    waiting_on: int
    error: str
    updated_at: datetime
    # The result's stored size (None: no result), and its first characters (None: none, or
    # too large to read for a preview).
    result_bytes: int | None
    result_preview: str | None
    # How many items it waits for (up to COUNT_CAP + 1), and the first of them.
    parents: int
    first_parents: list[ParentRef]


@dataclass(frozen=True)
class StepsPage:
    steps: list[StepRow]
    # Pass as ``after`` for the next page; None: this page was the last.
    next_after: uuid.UUID | None


class Blocker(NamedTuple):
    """A step that holds others up: dead (requeue it), or cancelled or discarded (they will
    wait for it forever: cancel the workflow)."""

    id: uuid.UUID
    status: str
    kind: str
    place: int | None
    error: str
    updated_at: datetime
    # How many waiting items need it done (up to COUNT_CAP + 1).
    waiting: int


class CallbackRow(NamedTuple):
    place: int | None
    callback: str
    id: uuid.UUID
    kind: str
    status: str
    waiting_on: int
    attempts: int
    updated_at: datetime
    parents: int

    @property
    def fired(self) -> bool:
        """Whether its members let it start: it left ``waiting`` with none of its edges unmet
        (one cancelled or discarded while it waited never started)."""
        return self.status != Status.WAITING and self.waiting_on == 0


class Holding(NamedTuple):
    """What an item holds up: its own workflow (None: a plain item), how many waiting items
    need it done (up to COUNT_CAP + 1), and the workflows of some of them."""

    id: uuid.UUID
    workflow_id: uuid.UUID | None
    waiting: int
    workflows: list[uuid.UUID]


def _parents(text: str | None) -> list[ParentRef]:
    return [
        ParentRef(uuid.UUID(parent), needs, status, place)
        for parent, needs, status, place in json.loads(text or "[]")
    ]


def _steps_plan(
    org_id: uuid.UUID, workflow_id: uuid.UUID, after: uuid.UUID | None, limit: int
) -> Plan[StepsPage]:
    wanted = max(1, min(int(limit), PAGE_MAX))
    params = StepsParams(
        org_id,
        workflow_id,
        after or _FIRST,
        wanted,
        COUNT_CAP,
        PARENTS_SHOWN,
        PREVIEW_CHARS,
        PREVIEW_BYTES,
    )
    rows: Rows = yield System(READ_STEPS, params)
    # A step whose item is not there (NULLs) is left out, but counts for the page's length.
    steps = [
        StepRow._make([*row[1:-1], _parents(row[-1])]) for row in rows.rows if row[3] is not None
    ]
    # A page shorter than asked for is the last.
    return StepsPage(steps, rows.rows[-1][0] if len(rows.rows) == wanted else None)


@transition
def read_steps(
    org_id: uuid.UUID,
    workflow_id: uuid.UUID,
    after: uuid.UUID | None = None,
    limit: int = 50,
    scope: uuid.UUID | None = None,
) -> Plan[StepsPage]:
    """A page of the workflow's steps in id order, after ``after`` (the last page's
    ``next_after``), at most ``limit`` (up to ``PAGE_MAX``); one statement. ``scope``: None
    reads on the system login (the operator), a tenant under its row-level security."""
    return (yield from under_tenant(_steps_plan(org_id, workflow_id, after, limit), scope))


def _counts_plan(org_id: uuid.UUID, workflow_id: uuid.UUID) -> Plan[dict[str, int]]:
    rows: Rows = yield System(READ_COUNTS, _Workflow(org_id, workflow_id))
    found: dict[str | None, int] = {status: int(n) for status, n in rows.rows}
    steps = found.pop(None, 0)
    # The index the counts read holds no done step: the others are done.
    found[Status.DONE] = max(steps - sum(found.values()), 0)
    return {status: found[status] for status in Status.values if found.get(status)}


@transition
def read_counts(
    org_id: uuid.UUID, workflow_id: uuid.UUID, scope: uuid.UUID | None = None
) -> Plan[dict[str, int]]:
    """How many of the workflow's steps are in each status (only those with any), in the
    statuses' order; one statement."""
    return (yield from under_tenant(_counts_plan(org_id, workflow_id), scope))


def _blockers_plan(org_id: uuid.UUID, workflow_id: uuid.UUID) -> Plan[list[Blocker]]:
    params = BlockersParams(org_id, workflow_id, LISTED, SCAN, COUNT_CAP)
    rows: Rows = yield System(READ_BLOCKERS, params)
    return [Blocker(*row) for row in rows.rows]


@transition
def read_blockers(
    org_id: uuid.UUID, workflow_id: uuid.UUID, scope: uuid.UUID | None = None
) -> Plan[list[Blocker]]:
    """The workflow's steps that hold the rest up, dead ones first (up to ``LISTED``), each
    with how many waiting items need it done; one statement."""
    return (yield from under_tenant(_blockers_plan(org_id, workflow_id), scope))


def _callbacks_plan(org_id: uuid.UUID, workflow_id: uuid.UUID) -> Plan[list[CallbackRow]]:
    params = CallbacksParams(org_id, workflow_id, LISTED, COUNT_CAP)
    rows: Rows = yield System(READ_CALLBACKS, params)
    return [CallbackRow(*row) for row in rows.rows]


@transition
def read_callbacks(
    org_id: uuid.UUID, workflow_id: uuid.UUID, scope: uuid.UUID | None = None
) -> Plan[list[CallbackRow]]:
    """The workflow's group callbacks as they are now (up to ``LISTED``); one statement."""
    return (yield from under_tenant(_callbacks_plan(org_id, workflow_id), scope))


def _holding_plan(ids: Sequence[uuid.UUID]) -> Plan[dict[uuid.UUID, Holding]]:
    if not ids:
        return {}
    rows: Rows = yield System(READ_HOLDING, HoldingParams(list(ids), COUNT_CAP))
    return {
        item_id: Holding(item_id, workflow_id, int(waiting), list(workflows or []))
        for item_id, workflow_id, waiting, workflows in rows.rows
    }


@transition
def read_holding(
    ids: Sequence[Any], scope: uuid.UUID | None = None
) -> Plan[dict[uuid.UUID, Holding]]:
    """What each of the items ``ids`` holds up (a page of dead letters), by id: only those
    that are a workflow's step or that some item waits for; one statement."""
    return (yield from under_tenant(_holding_plan([uuid.UUID(str(i)) for i in ids]), scope))
