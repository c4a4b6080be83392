"""The workflow graph's layout, pure: levels by the longest chain of edges, the steps a dead one
holds up, the drawing's boxes and edges, the summary by level and status."""

from __future__ import annotations

import uuid

from workqueue.workflows.graph import NODE_W, Node, draw, held_up, levels, summarise


def _ids(n: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=i + 1) for i in range(n)]


def node(i: uuid.UUID, status: str = "pending", *parents: tuple[uuid.UUID, str]) -> Node:
    return Node(i, None, None, "NOOP", status, tuple(parents))


def test_a_step_sits_one_level_past_its_highest_parent() -> None:
    a, b, c, d = _ids(4)
    # a -> b -> c, and a -> c directly: c is at level 2, not 1; d waits for nothing.
    nodes = [node(a), node(b, "waiting", (a, "done")), node(c, "waiting", (a, "done"), (b, "done"))]
    nodes.append(node(d))
    assert levels(nodes) == {a: 0, b: 1, c: 2, d: 0}


def test_an_edge_to_an_item_outside_the_workflow_places_nothing() -> None:
    a, outside = _ids(2)
    nodes = [node(a, "waiting", (outside, "done"))]
    assert levels(nodes) == {a: 0}
    assert draw(nodes, lambda n: "#").outside == 1


def test_a_cycle_written_by_hand_still_places_every_step() -> None:
    a, b, c = _ids(3)
    nodes = [node(a), node(b, "waiting", (c, "done")), node(c, "waiting", (b, "done"))]
    placed = levels(nodes)
    assert placed[a] == 0 and placed[b] == placed[c] == 1


def test_a_dead_step_holds_what_needs_it_done_and_what_waits_behind_that() -> None:
    dead, held, behind, finished, free = _ids(5)
    nodes = [
        node(dead, "failed"),
        node(held, "waiting", (dead, "done")),
        node(behind, "waiting", (held, "finished")),
        # Needs it finished however: a dead parent lets it go on.
        node(finished, "pending", (dead, "finished")),
        node(free, "pending"),
    ]
    assert held_up(nodes) == {held, behind}


def test_the_drawing_places_levels_left_to_right_and_marks_the_held_edges() -> None:
    dead, ok, callback = _ids(3)
    nodes = [
        node(dead, "failed"),
        node(ok, "done"),
        node(callback, "waiting", (dead, "done"), (ok, "done")),
    ]
    drawing = draw(nodes, lambda n: f"/item/{n.id}/")
    boxes = {box.id: box for box in drawing.boxes}
    assert boxes[dead].x == boxes[ok].x < boxes[callback].x
    assert "dead" in boxes[dead].classes and "held" in boxes[callback].classes
    assert boxes[callback].href == f"/item/{callback}/"
    held = [(line.parent, line.child) for line in drawing.lines if "held" in line.classes]
    assert held == [(dead, callback)]
    assert drawing.width >= 2 * NODE_W and drawing.levels == 2


def test_the_summary_counts_each_level_by_status() -> None:
    members = _ids(5)
    callback = uuid.UUID(int=99)
    nodes = [node(m, "failed" if i == 0 else "done") for i, m in enumerate(members)]
    nodes.append(node(callback, "waiting", *((m, "done") for m in members)))
    summary = summarise(nodes)
    assert [(row.level, row.counts, row.total) for row in summary.levels] == [
        (0, {"done": 4, "failed": 1}, 5),
        (1, {"waiting": 1}, 1),
    ]
    assert (summary.steps, summary.dead, summary.held) == (6, 1, 1)
    assert summary.statuses == ["waiting", "done", "failed"]
    assert sum(width for _, _, width in summary.levels[0].bar) == 100.0
