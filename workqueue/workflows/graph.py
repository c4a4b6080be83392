"""A workflow's graph as the admin shows it: its steps read with their edges (one statement),
placed in layers by their topological level, and either drawn node by node (up to
``GRAPH_MAX`` steps) or, for a larger workflow, summarised as counts by level and status.

The geometry is computed here and drawn by the page's template as inline SVG (no script, as the
gauges' charts are): each node is a link (a dead step's to its triage page), coloured by its
status; a dead step and the waiting steps it holds up, and the edges between them, are marked.
A step's level is the longest chain of edges from a step that waits for nothing in the
workflow (an edge to an item outside it places nothing).
"""

from __future__ import annotations

import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from workqueue import SQL_DIR
from workqueue.figures import under_tenant
from workqueue.models import Needs, Status
from workqueue.workflows.builder import MAX_STEPS
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, transition

# The most steps drawn node by node; a larger workflow is summarised by level and status.
GRAPH_MAX = 200
# The most steps whose levels a summary counts (every workflow: the declaration's own bound).
LEVELS_MAX = MAX_STEPS
# A node's box, the room between levels (for the edges) and between the boxes of a level.
NODE_W, NODE_H = 172, 36
LEVEL_GAP, ROW_GAP, MARGIN = 64, 10, 8
# The characters of a kind a node shows.
KIND_CHARS = 20


class GraphParams(NamedTuple):
    org_id: uuid.UUID
    workflow_id: uuid.UUID
    limit: int


READ_GRAPH = Statement("read_workflow_graph", GraphParams, SQL_DIR)


class Node(NamedTuple):
    """A step: its place and callback in the declaration, its kind and status (None: its item
    was purged), and the items it waits for with what each edge needs of them."""

    id: uuid.UUID
    place: int | None
    callback: str | None
    kind: str | None
    status: str | None
    parents: tuple[tuple[uuid.UUID, str], ...]


def _graph_plan(org_id: uuid.UUID, workflow_id: uuid.UUID, limit: int) -> Plan[list[Node]]:
    rows: Rows = yield System(READ_GRAPH, GraphParams(org_id, workflow_id, max(1, int(limit))))
    return [
        Node(item_id, place, callback, kind, status, tuple(zip(parents, needs, strict=True)))
        for item_id, place, callback, kind, status, parents, needs in rows.rows
    ]


@transition
def read_graph(
    org_id: uuid.UUID, workflow_id: uuid.UUID, limit: int, scope: uuid.UUID | None = None
) -> Plan[list[Node]]:
    """The workflow's first ``limit`` steps in id order, each with its edges; one statement.
    ``scope``: None reads on the system login (the operator), a tenant under its row-level
    security."""
    return (yield from under_tenant(_graph_plan(org_id, workflow_id, limit), scope))


class _Edges(NamedTuple):
    """The edges between a workflow's steps, by the steps' places in the list read (ints hash
    in C: a UUID's hash is a Python call, and a summary makes millions of lookups)."""

    # For each step, its parents in the workflow: (their index, what the edge needs).
    parents: list[list[tuple[int, str]]]
    children: list[list[tuple[int, str]]]
    # Edges to items outside the workflow.
    outside: int


def _edges(nodes: Sequence[Node]) -> _Edges:
    index = {node.id.int: i for i, node in enumerate(nodes)}
    parents: list[list[tuple[int, str]]] = [[] for _ in nodes]
    children: list[list[tuple[int, str]]] = [[] for _ in nodes]
    outside = 0
    for i, node in enumerate(nodes):
        for parent, needs in node.parents:
            p = index.get(parent.int)
            if p is None:
                outside += 1
                continue
            parents[i].append((p, needs))
            children[p].append((i, needs))
    return _Edges(parents, children, outside)


def _levels(edges: _Edges) -> list[int]:
    unmet = [len(parents) for parents in edges.parents]
    level = [0] * len(unmet)
    ready = deque(i for i, n in enumerate(unmet) if n == 0)
    placed = 0
    while ready:
        i = ready.popleft()
        placed += 1
        for child, _ in edges.children[i]:
            level[child] = max(level[child], level[i] + 1)
            unmet[child] -= 1
            if unmet[child] == 0:
                ready.append(child)
    if placed < len(unmet):
        top = max(level, default=0) + 1
        level = [top if n > 0 else at for at, n in zip(level, unmet, strict=True)]
    return level


def _held_up(nodes: Sequence[Node], edges: _Edges) -> set[int]:
    waiting = {i for i, node in enumerate(nodes) if node.status == Status.WAITING}
    dead = {i for i, node in enumerate(nodes) if node.status == Status.FAILED}
    held: set[int] = set()
    frontier = deque(dead)
    while frontier:
        parent = frontier.popleft()
        for child, needs in edges.children[parent]:
            # A dead parent meets an edge that needs it finished: that child goes on.
            if child in held or child not in waiting or (parent in dead and needs != Needs.DONE):
                continue
            held.add(child)
            frontier.append(child)
    return held


def levels(nodes: Sequence[Node]) -> dict[uuid.UUID, int]:
    """Each step's level: 0 for one that waits for no step of the workflow, else one more than
    its highest parent's (Kahn's order, linear in steps and edges). A declaration refuses a
    cycle; a step left on one anyway (rows written by hand) goes one level past the rest."""
    return {node.id: at for node, at in zip(nodes, _levels(_edges(nodes)), strict=True)}


def held_up(nodes: Sequence[Node]) -> set[uuid.UUID]:
    """The waiting steps a dead step holds up: those that need a dead step done, and those
    waiting for a step held up (it will not end until the dead one is requeued and done)."""
    return {nodes[i].id for i in _held_up(nodes, _edges(nodes))}


def _label(node: Node) -> str:
    where = f"steps[{node.place}]" if node.place is not None else "step"
    if node.callback:
        where += f" {node.callback}"
    return where


def _kind(node: Node) -> str:
    kind = node.kind or "(purged)"
    return kind if len(kind) <= KIND_CHARS else kind[: KIND_CHARS - 1] + "…"


@dataclass(frozen=True)
class Box:
    """A node as drawn: its box's corner, its link, its words, its classes."""

    id: uuid.UUID
    x: int
    y: int
    href: str
    label: str
    kind: str
    status: str
    classes: str
    title: str


@dataclass(frozen=True)
class Line:
    """An edge as drawn: its path (parent's right side to the child's left) and classes."""

    parent: uuid.UUID
    child: uuid.UUID
    d: str
    classes: str


@dataclass(frozen=True)
class Drawing:
    width: int
    height: int
    boxes: list[Box]
    lines: list[Line]
    # Edges to items outside the workflow (not drawn), and how many levels.
    outside: int
    levels: int
    node_w: int = NODE_W
    node_h: int = NODE_H


def _order(nodes: Sequence[Node], edges: _Edges, level: list[int]) -> list[list[int]]:
    """The steps of each level, top to bottom: by the mean row of their parents a level up
    (fewer crossings), then by their place in the declaration, then by id."""
    layers: dict[int, list[int]] = defaultdict(list)
    for i, at in enumerate(level):
        layers[at].append(i)
    row: dict[int, float] = {}
    ordered = []
    for depth in sorted(layers):

        def key(i: int) -> tuple[float, int, uuid.UUID]:
            rows = [row[p] for p, _ in edges.parents[i] if p in row]
            mean = sum(rows) / len(rows) if rows else -1.0
            place = nodes[i].place
            return (mean, place if place is not None else -1, nodes[i].id)

        layer = sorted(layers[depth], key=key)
        for at, i in enumerate(layer):
            row[i] = float(at)
        ordered.append(layer)
    return ordered


def draw(nodes: Sequence[Node], href_of: Callable[[Node], str]) -> Drawing:
    """The workflow drawn in layers, left to right by level: a box per step, a curve per edge
    between two of its steps; ``href_of`` gives each node's link."""
    edges = _edges(nodes)
    level = _levels(edges)
    held = _held_up(nodes, edges)
    layers = _order(nodes, edges, level)
    where: dict[int, tuple[int, int]] = {}
    boxes = []
    for depth, layer in enumerate(layers):
        for row, i in enumerate(layer):
            node = nodes[i]
            x = MARGIN + depth * (NODE_W + LEVEL_GAP)
            y = MARGIN + row * (NODE_H + ROW_GAP)
            where[i] = (x, y)
            status = node.status or "purged"
            dead = node.status == Status.FAILED
            classes = f"node status-{status}" + (" dead" if dead else "")
            classes += " held" if i in held else ""
            title = f"{_label(node)}: {node.kind or 'purged'} {status} ({node.id})"
            if dead:
                title += ", dead: open its triage"
            elif i in held:
                title += ", held up by a dead step"
            boxes.append(
                Box(node.id, x, y, href_of(node), _label(node), _kind(node), status, classes, title)
            )
    lines = []
    for i, parents in enumerate(edges.parents):
        for parent, needs in parents:
            (px, py), (cx, cy) = where[parent], where[i]
            x1, y1, x2, y2 = px + NODE_W, py + NODE_H // 2, cx, cy + NODE_H // 2
            bend = max((x2 - x1) // 2, LEVEL_GAP // 2)
            d = f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
            classes = "edge" + (" needs-finished" if needs == Needs.FINISHED else "")
            if i in held and (parent in held or nodes[parent].status == Status.FAILED):
                classes += " held"
            lines.append(Line(nodes[parent].id, nodes[i].id, d, classes))
    tallest = max((len(layer) for layer in layers), default=0)
    width = 2 * MARGIN + len(layers) * NODE_W + max(len(layers) - 1, 0) * LEVEL_GAP
    height = 2 * MARGIN + tallest * NODE_H + max(tallest - 1, 0) * ROW_GAP
    return Drawing(width, height, boxes, lines, edges.outside, len(layers))


@dataclass(frozen=True)
class Level:
    """How many steps of one level are in each status."""

    level: int
    counts: dict[str, int]
    total: int
    # The bar's segments: (status, x, width) on a scale of 0 to 100.
    bar: list[tuple[str, float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Summary:
    """A workflow too large to draw: its steps counted by level and status, how many are dead
    and how many waiting steps they hold up."""

    levels: list[Level]
    steps: int
    dead: int
    held: int
    statuses: list[str]


def summarise(nodes: Sequence[Node]) -> Summary:
    """Count the steps by level and status (levels as ``levels`` places them)."""
    edges = _edges(nodes)
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node, at in zip(nodes, _levels(edges), strict=True):
        counts[at][node.status or "purged"] += 1
    statuses = [*Status.values, "purged"]
    rows = []
    for depth in sorted(counts):
        by_status = {s: counts[depth][s] for s in statuses if counts[depth].get(s)}
        total = sum(by_status.values())
        rows.append(Level(depth, by_status, total, _bar(by_status, total)))
    used = [s for s in statuses if any(s in row.counts for row in rows)]
    dead = sum(1 for node in nodes if node.status == Status.FAILED)
    return Summary(rows, len(nodes), dead, len(_held_up(nodes, edges)), used)


def _bar(counts: dict[str, int], total: int) -> list[tuple[str, float, float]]:
    segments, x = [], 0.0
    for status, n in counts.items():
        width = 100.0 * n / total if total else 0.0
        segments.append((status, round(x, 2), round(width, 2)))
        x += width
    return segments


def statuses_drawn(boxes: Iterable[Box]) -> list[str]:
    """The statuses a drawing shows, in the statuses' order (its legend)."""
    shown = {box.status for box in boxes}
    return [s for s in [*Status.values, "purged"] if s in shown]
