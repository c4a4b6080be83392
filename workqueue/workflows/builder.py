"""Declaring a workflow: its steps, the edges between them, and its shapes (chain, group).

Nothing here touches the database: a ``Workflow`` is a description, checked and turned into rows
and edges when it is enqueued (``workqueue.workflows.declare``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from workqueue.enqueue import NewItem
from workqueue.exceptions import InvalidPayload
from workqueue.models import Callback, Needs

# The most steps and edges one declaration may hold: it is one transaction and one statement.
MAX_STEPS = 200_000
MAX_EDGES = 400_000


@dataclass(frozen=True, eq=False)
class Step:
    """A step of a workflow: the item it enqueues, and where it was declared (its index in the
    workflow's steps, which names it in messages: ``steps[3]``)."""

    workflow: Workflow
    index: int
    item: NewItem

    def __repr__(self) -> str:
        return f"<step {self.index}: {self.item.kind}>"


@dataclass(frozen=True)
class Group:
    """A group's steps: its members, and its callbacks when it has them (``on_success`` waits
    for every member done, ``on_complete`` for every member finished, however)."""

    members: tuple[Step, ...]
    on_success: Step | None = None
    on_complete: Step | None = None


# What a step may wait for: another step, a group's members, or an item already enqueued (its id).
Ref = Step | Group | uuid.UUID | str


@dataclass(frozen=True)
class Edge:
    """``child`` waits for ``parent`` (a step's index, or an existing item's id, as given)."""

    parent: int | object
    child: int
    needs: str


class Workflow:
    """A workflow being declared: steps (items) and the edges between them, enqueued together
    by ``enqueue_workflow`` in the caller's transaction.

    ``key``: the workflow's idempotency key (at most 200 characters). Declaring it again under
    the same key in the same tenant writes nothing and answers with the first declaration's ids
    (the ids are derived from the key and each step's place, so declare the same steps in the
    same order).

        wf = Workflow(key=f"order:{order.id}")
        fetch, parse, store = wf.chain(NewItem("FETCH", {...}), NewItem("PARSE", {...}),
                                       NewItem("STORE", {...}))
        wf.group([NewItem("RESIZE", {"size": s}) for s in sizes], after=[store],
                 on_success=NewItem("PUBLISH", {}), on_complete=NewItem("REPORT", {}))
    """

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        self.steps: list[Step] = []
        self.edges: list[Edge] = []
        # The groups' callbacks, by step index: which one each is (kept for the admin's page).
        self.callbacks: dict[int, str] = {}

    def step(
        self,
        kind: str | NewItem,
        payload: dict[str, Any] | None = None,
        /,
        *,
        after: Iterable[Ref] = (),
        after_finished: Iterable[Ref] = (),
        **options: Any,
    ) -> Step:
        """Add a step: ``kind`` and ``payload`` with any of ``NewItem``'s options (``lane``,
        ``priority``, ``available_at``, ``max_attempts``, ``concurrency_key``), or a
        ``NewItem``. It runs once every step or item in ``after`` is done (a dead one holds it)
        and every one in ``after_finished`` has finished (done, dead, cancelled or
        discarded)."""
        if isinstance(kind, NewItem):
            if payload is not None or options:
                raise TypeError("step(NewItem(...)) takes no payload or options of its own")
            item = kind
        else:
            item = NewItem(kind, payload if payload is not None else {}, **options)
        added = Step(self, len(self.steps), item)
        self.steps.append(added)
        for ref in after:
            self.edge(ref, added)
        for ref in after_finished:
            self.edge(ref, added, needs=Needs.FINISHED)
        return added

    def edge(self, parent: Ref, child: object, needs: str = Needs.DONE) -> None:
        """Make ``child`` (a step of this workflow) wait for ``parent`` (a step, a group's
        members, or an existing item's id), until it is done (``needs="done"``) or has
        finished however (``"finished"``)."""
        if not isinstance(child, Step) or child.workflow is not self:
            raise InvalidPayload("edge: the child must be a step of this workflow")
        if isinstance(parent, Group):
            for member in parent.members:
                self.edge(member, child, needs)
            return
        if isinstance(parent, Step):
            if parent.workflow is not self:
                raise InvalidPayload(
                    f"steps[{child.index}]: waits for a step of another workflow; "
                    "declare both in one workflow, or wait for the other's item by its id"
                )
            self.edges.append(Edge(parent.index, child.index, str(needs)))
            return
        self.edges.append(Edge(parent, child.index, str(needs)))

    def chain(self, *items: NewItem, after: Iterable[Ref] = ()) -> list[Step]:
        """Add ``items`` as steps that run one after another (each once the one before it is
        done); the first after ``after``."""
        steps: list[Step] = []
        waits_for: Iterable[Ref] = after
        for item in items:
            added = self.step(item)
            for ref in waits_for:
                self.edge(ref, added)
            steps.append(added)
            waits_for = (added,)
        return steps

    def group(
        self,
        items: Sequence[NewItem],
        *,
        on_success: NewItem | None = None,
        on_complete: NewItem | None = None,
        after: Iterable[Ref] = (),
    ) -> Group:
        """Add ``items`` as steps that run side by side (each after ``after``), with callbacks
        started exactly once: ``on_success`` when every member is done (a dead member holds
        it), ``on_complete`` when every member has finished (done, dead, cancelled or
        discarded). A callback reads how its members ended, and their results, with
        ``read_parents`` and ``count_parents``."""
        waits_for = tuple(after)
        members = tuple(self.step(item, after=waits_for) for item in items)
        if not members:
            raise InvalidPayload("group: give it at least one item")
        success = self.step(on_success, after=members) if on_success is not None else None
        complete = (
            self.step(on_complete, after_finished=members) if on_complete is not None else None
        )
        for callback, which in ((success, Callback.ON_SUCCESS), (complete, Callback.ON_COMPLETE)):
            if callback is not None:
                self.callbacks[callback.index] = which
        return Group(members, success, complete)
