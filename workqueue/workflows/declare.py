"""enqueue_workflow: put a whole workflow on the queue, in the caller's transaction.

Its steps are inserted by one statement (the bulk enqueue's insert, ``enqueue_many_rows``, with
each step's edges, parent flag and workflow placed beside its columns), and its edges and each
step's place and callback (``WorkflowStep``) in the same one. A step whose edges are all met
(none, or to existing items that ended as needed) is pending at once; the others are
``waiting``, which no claim sees, until the statement that ends their last parent makes them
pending. Before it, at most two reads: the ids of a keyed workflow, checked against other
tenants' items (as a bulk enqueue checks ids its caller chose), and the existing items steps
wait for, checked in the tenant (another tenant's is not found, as under row-level security it
is not there).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.columns import (
    STEP_PLACED,
    STEP_ROW_FIELDS,
    Author,
    many_arrays,
    many_insert_parts,
    statement_params,
)
from workqueue.enqueue import (
    READ_ITEMS,
    TAKEN_IDS,
    Outcome,
    ReadItemsParams,
    TakenIdsParams,
)
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.kinds import get_kind
from workqueue.models import Needs, Status, WorkItem
from workqueue.ready import READY_ROWS
from workqueue.rows import items_of
from workqueue.signals import send_enqueued
from workqueue.workflows.builder import Step, Workflow
from workqueue.workflows.shape import Shape, lay_out
from wqcore.arrays import TextArray, UUIDArray
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, Tenant, transition

# The statement's parameters: the steps' columns (as the bulk insert takes them), then the
# first step's id (the workflow declared before?), the existing items waited for, and the edges.
EnqueueWorkflowParams = statement_params(
    "EnqueueWorkflowParams",
    (
        *STEP_ROW_FIELDS,
        "anchor",
        "callback_ids",
        "callback_kinds",
        "parent_items",
        "edge_parents",
        "edge_children",
        "edge_needs",
    ),
)
_StepRowsParams = statement_params("StepRowsParams", STEP_ROW_FIELDS)

# A step's unmet edges: all it has (placed) but those met already (the statement's ``met``).
_UNMET = "i.waiting_on - COALESCE(m.edges, 0)"
_STEP_VALUES = {
    "waiting_on": _UNMET,
    "status": f"CASE WHEN {_UNMET} > 0 THEN 'waiting' ELSE 'pending' END",
}


def _step_insert_parts() -> dict[str, str]:
    return many_insert_parts(STEP_PLACED, _STEP_VALUES)


_STEP_ROWS = Statement(
    "enqueue_many_rows", _StepRowsParams, SQL_DIR, build_parts=_step_insert_parts
)
ENQUEUE_WORKFLOW = Statement(
    "enqueue_workflow",
    EnqueueWorkflowParams,
    SQL_DIR,
    names_tenant=True,
    includes=(_STEP_ROWS, READY_ROWS),
)

# What a parent that ended so can never become again: nothing waits for it to be done.
_NEVER_DONE = frozenset({Status.CANCELLED, Status.DISCARDED})


@dataclass(frozen=True)
class Declared:
    """A workflow as enqueued: its id, each step's item id (in the order the steps were
    declared; ``declared[step]`` for one step), and whether this call wrote it (``INSERTED``)
    or found it written before under its key (``KEY_EXISTS``: nothing was written; the ids are
    the first declaration's)."""

    workflow_id: uuid.UUID
    ids: tuple[uuid.UUID, ...]
    outcome: Outcome

    def __getitem__(self, step: Step) -> uuid.UUID:
        return self.ids[step.index]


def _check_existing(shape: Shape, found: Sequence[WorkItem]) -> None:
    """Refuse a parent that is not in the tenant, or one a step needs done that can never be."""
    status = {item.id: item.status for item in found}
    for parent, needs_of in shape.existing.items():
        child = min(needs_of)
        if parent not in status:
            raise InvalidPayload(
                f"steps[{child}].after: work item {parent} not found in this tenant"
            )
        for child, needs in sorted(needs_of.items()):
            if needs == Needs.DONE and status[parent] in _NEVER_DONE:
                raise InvalidPayload(
                    f"steps[{child}].after: work item {parent} is {status[parent]}: it will "
                    "never be done (wait for it with after_finished, or not at all)"
                )


def _params(author: Author, shape: Shape, workflow: Workflow) -> Any:
    rows = shape.rows
    callbacks = sorted(workflow.callbacks.items())
    placed: dict[str, list[Any]] = {
        "waiting_on": shape.edge_counts,
        "has_dependents": shape.has_dependents,
        "workflow_id": [shape.workflow_id] * len(rows),
    }
    parents, children, needs = zip(*shape.edges, strict=True) if shape.edges else ((), (), ())
    return EnqueueWorkflowParams(
        *many_arrays(rows),
        *(array(placed[name]) for name, array in STEP_PLACED.items()),
        *author,
        anchor=rows[0].id,
        callback_ids=UUIDArray([shape.ids[index] for index, _ in callbacks]),
        callback_kinds=TextArray([which for _, which in callbacks]),
        parent_items=list(shape.existing),
        edge_parents=UUIDArray(parents),
        edge_children=UUIDArray(children),
        edge_needs=TextArray(needs),
    )


@transition
def enqueue_workflow(ctx: OpContext, workflow: Workflow) -> Plan[Declared]:
    """Enqueue every step of ``workflow`` and its edges in the context's tenant, by the
    context's user, joining the caller's transaction (``aenqueue_workflow`` commits on its
    own). A step runs once the steps and items it waits for are done (or, for
    ``after_finished`` and a group's ``on_complete``, have finished however); it is then an
    ordinary item: its retries, time limit, lane, priority, keys, caps, pauses and fairness
    apply.

    Refused before anything is stored, with ``InvalidPayload`` naming the step: an invalid
    item, a step with an id or idempotency key of its own, a cycle, an existing item waited for
    that is not in this tenant (or, needed done, is cancelled or discarded). With a ``key``, a
    second declaration writes nothing and returns the first's ids (``KEY_EXISTS``)."""
    author = Author.of(ctx)
    shape = lay_out(workflow, author.org_id)
    if workflow.key is not None:
        taken: Rows = yield System(TAKEN_IDS, TakenIdsParams(author.org_id, shape.ids))
        if taken.rows:
            raise Conflict(f"work item id {taken.rows[0][0]} is taken: nothing was stored")
    if shape.existing:
        found: Rows = yield Tenant(
            author.org_id, READ_ITEMS, ReadItemsParams(list(shape.existing), [])
        )
        _check_existing(shape, items_of(found))
    rows: Rows = yield Tenant(author.org_id, ENQUEUE_WORKFLOW, _params(author, shape, workflow))
    fresh, written, parents, steps = rows.rows[0][:4]
    if fresh and not written:
        raise Conflict(
            f"{len(shape.existing) - parents} of the items the workflow waits for went away "
            "while it was declared: nothing was stored"
        )
    outcome = Outcome.INSERTED if written and steps else Outcome.KEY_EXISTS
    return Declared(shape.workflow_id, tuple(shape.ids), outcome)


@enqueue_workflow.after_sync
def _announce(declared: Declared, ctx: OpContext, workflow: Workflow) -> None:
    if declared.outcome == Outcome.INSERTED:
        send_enqueued(
            [
                (item_id, step.item.kind, step.item.lane or get_kind(step.item.kind).lane)
                for step, item_id in zip(workflow.steps, declared.ids, strict=True)
            ]
        )


aenqueue_workflow = enqueue_workflow.aio
