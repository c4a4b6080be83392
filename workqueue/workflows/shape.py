"""A declared workflow checked and laid out as the rows and edges its insert writes.

Everything a caller can get wrong is refused here, before any statement runs, with one message
naming the step: an invalid item (``validated``, as any enqueue), a step given an id or a key of
its own, a parent that is not a step of this workflow nor an id, a cycle, too many steps. Only
the existing items a step waits for are checked by the database (``declare``).
"""

from __future__ import annotations

import uuid
from collections import defaultdict, deque
from dataclasses import dataclass

from workqueue.columns import Row, validated
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import KEY_MAX, check_id, check_text
from workqueue.models import Needs, new_item_id
from workqueue.workflows.builder import MAX_EDGES, MAX_STEPS, Workflow

# Names the ids of a keyed workflow's steps: the same key in the same tenant gives the same ids.
_KEYED_IDS = uuid.UUID("6f0c6b1e-3f5a-4c59-9a53-8f0e2f7f1d2a")


@dataclass(frozen=True)
class Shape:
    """What the insert writes: each step's validated row (its id set), in declaration order,
    with its edges' count and whether it is a parent; the edges; the existing items waited
    for."""

    # The workflow's id: its first step's, so the workflow is found by the primary key, however
    # its steps ended.
    workflow_id: uuid.UUID
    rows: list[Row]
    # How many edges each step has (the insert takes off those met already).
    edge_counts: list[int]
    has_dependents: list[bool]
    # Each edge: parent id, child id, what the child needs of the parent.
    edges: list[tuple[uuid.UUID, uuid.UUID, str]]
    # The existing items steps wait for (in id order), each with the steps that wait for it and
    # what each needs of it.
    existing: dict[uuid.UUID, dict[int, str]]

    @property
    def ids(self) -> list[uuid.UUID]:
        return [row.id for row in self.rows]


def _check_key(key: object) -> str | None:
    return None if key is None else check_text("key", key, KEY_MAX)


def _rows(workflow: Workflow) -> list[Row]:
    if not workflow.steps:
        raise InvalidPayload("steps: a workflow needs at least one step")
    if len(workflow.steps) > MAX_STEPS:
        raise InvalidPayload(f"steps: at most {MAX_STEPS} in one workflow")
    rows = []
    for step in workflow.steps:
        where = f"steps[{step.index}]"
        for own in ("id", "idempotency_key"):
            if getattr(step.item, own) is not None:
                raise InvalidPayload(
                    f"{where}.{own}: a step takes none of its own (the queue names its steps; "
                    "a retried declaration is told apart by the workflow's key)"
                )
        rows.append(validated(step.item, f"{where}."))
    return rows


def _edges(workflow: Workflow) -> dict[tuple[int | uuid.UUID, int], str]:
    """Each (parent, child) once, with what the child needs (``done`` where both were asked:
    it implies ``finished``)."""
    if len(workflow.edges) > MAX_EDGES:
        raise InvalidPayload(f"edges: at most {MAX_EDGES} in one workflow")
    found: dict[tuple[int | uuid.UUID, int], str] = {}
    known = frozenset(Needs.values)
    for edge in workflow.edges:
        if edge.needs not in known:
            raise InvalidPayload(f"steps[{edge.child}]: needs must be one of {sorted(known)}")
        parent = (
            edge.parent
            if isinstance(edge.parent, int)
            else check_id(edge.parent, f"steps[{edge.child}].after")
        )
        key = (parent, edge.child)
        found[key] = Needs.DONE if found.get(key) == Needs.DONE else edge.needs
    return found


def _cycle(children: dict[int, list[int]], left: set[int]) -> list[int]:
    """A cycle among the steps ``left`` (each still waits for one of them): walk back from
    one through parents still left until a step comes round again."""
    parents: dict[int, list[int]] = defaultdict(list)
    for parent, kids in children.items():
        for child in kids:
            if parent in left and child in left:
                parents[child].append(parent)
    path: list[int] = []
    seen: dict[int, int] = {}
    step = min(left)
    while step not in seen:
        seen[step] = len(path)
        path.append(step)
        step = parents[step][0]
    return [*path[seen[step] :], step][::-1]


def _topological(n: int, edges: dict[tuple[int | uuid.UUID, int], str]) -> list[int]:
    """The steps in an order where each comes after every step it waits for, or the cycle."""
    children: dict[int, list[int]] = defaultdict(list)
    waiting = [0] * n
    for parent, child in edges:
        if isinstance(parent, int):
            children[parent].append(child)
            waiting[child] += 1
    ready = deque(i for i in range(n) if not waiting[i])
    order = []
    while ready:
        step = ready.popleft()
        order.append(step)
        for child in children[step]:
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    if len(order) < n:
        cycle = _cycle(children, set(range(n)) - set(order))
        shown = " -> ".join(f"steps[{i}]" for i in cycle)
        raise InvalidPayload(f"steps: they wait for each other in a cycle: {shown}")
    return order


def _ids(n: int, order: list[int], org_id: uuid.UUID, key: str | None) -> list[uuid.UUID]:
    """Each step's id, by declaration index. Unkeyed: fresh time-ordered ids, handed out in
    dependency order, so a parent's id sorts before its children's (the order statements lock
    them in). Keyed: derived from the tenant, the key and the step's index, so a retry names
    the same items."""
    if key is None:
        minted = sorted(new_item_id() for _ in range(n))
        ids = [minted[0]] * n
        for place, step in enumerate(order):
            ids[step] = minted[place]
        return ids
    return [uuid.uuid5(_KEYED_IDS, f"{org_id}/{key}/{i}") for i in range(n)]


def lay_out(workflow: Workflow, org_id: uuid.UUID) -> Shape:
    """``workflow`` checked and laid out for ``org_id``'s insert, or ``InvalidPayload``."""
    key = _check_key(workflow.key)
    rows = _rows(workflow)
    edges = _edges(workflow)
    order = _topological(len(rows), edges)
    ids = _ids(len(rows), order, org_id, key)
    rows = [row._replace(id=step_id) for row, step_id in zip(rows, ids, strict=True)]
    edge_counts = [0] * len(rows)
    has_dependents = [False] * len(rows)
    laid: list[tuple[uuid.UUID, uuid.UUID, str]] = []
    existing: dict[uuid.UUID, dict[int, str]] = defaultdict(dict)
    for (parent, child), needs in edges.items():
        edge_counts[child] += 1
        if isinstance(parent, int):
            has_dependents[parent] = True
            laid.append((ids[parent], ids[child], needs))
        else:
            existing[parent][child] = needs
            laid.append((parent, ids[child], needs))
    return Shape(ids[0], rows, edge_counts, has_dependents, laid, dict(sorted(existing.items())))
