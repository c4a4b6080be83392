"""A workflow's graph on its admin page: steps as boxes coloured by status in topological
levels, edges between them, the dead step marked and linked to its triage with what it holds up;
a workflow over ``GRAPH_MAX`` steps summarised by level and status instead, never drawn node by
node. The page is HTML and SVG alone: no script."""

from __future__ import annotations

import re
import time

import pytest

from tests.web.conftest import Person
from tests.web.test_admin_workflows import DEAD, noop, page_of, run_one, stuck_group
from workqueue import api
from workqueue.workflows import Workflow
from workqueue.workflows.graph import GRAPH_MAX

pytestmark = pytest.mark.usefixtures("committed")


def _node(text: str, item_id: object) -> str:
    """The node's opening tag."""
    found = re.search(rf'<a href="[^"]*" class="[^"]*" id="node-{item_id}"[^>]*>', text)
    assert found, item_id
    return found.group(0)


@pytest.fixture
def staff(member) -> Person:  # type: ignore[no-untyped-def]
    return member()


def test_the_graph_draws_each_step_and_marks_the_dead_one_and_what_it_holds(
    staff: Person, worker_rctx
) -> None:
    declared, group, dead = stuck_group(staff.ctx, worker_rctx)
    text = staff.client.get(page_of(declared.workflow_id)).text
    graph = text[text.index('id="graph"') : text.index('id="blockers"')]
    assert "<script" not in graph
    assert graph.count('class="node ') == 5
    # The dead member: marked, linked to its triage page.
    dead_node = _node(graph, dead.id)
    assert 'class="node status-failed dead"' in dead_node
    assert f'href="{DEAD}{dead.id}/change/"' in dead_node
    # It holds on_success (it needs every member done); on_complete is due: it needs any end.
    assert "held" in _node(graph, declared[group.on_success]).split('class="')[1].split('"')[0]
    assert "status-pending" in _node(graph, declared[group.on_complete])
    assert "held" not in _node(graph, declared[group.on_complete])
    for member_id in group.members:
        assert f"/admin/workqueue/workitem/{declared[member_id]}/change/" in graph or (
            declared[member_id] == dead.id
        )
    # Edges: three members to each callback; the dead one's to on_success marked.
    assert graph.count('class="edge') == 6
    assert graph.count('class="edge needs-finished"') == 3
    held = re.findall(r'class="edge held"[^>]*data-parent="([^"]+)" data-child="([^"]+)"', graph)
    assert held == [(str(dead.id), str(declared[group.on_success]))]
    # Two levels: the members at the left, the callbacks one level right.
    xs = {
        m.group(1): int(m.group(2))
        for m in re.finditer(
            r'id="node-([^"]+)"[^>]*><title>[^<]*</title>\s*<rect[^>]* x="(\d+)"', graph
        )
    }
    assert len({xs[str(declared[m])] for m in group.members}) == 1
    assert xs[str(declared[group.on_success])] > xs[str(dead.id)]


def test_a_dead_step_holds_up_the_whole_chain_after_it(staff: Person, worker_rctx) -> None:
    wf = Workflow()
    steps = wf.chain(noop(1, "wf-chain"), noop(2, "wf-chain"), noop(3, "wf-chain"))
    declared = api.enqueue_workflow(staff.ctx, wf)
    dead = run_one(worker_rctx, "wf-chain", error="PermanentError: no")
    text = staff.client.get(page_of(declared.workflow_id)).text
    assert "dead" in _node(text, dead.id)
    for later in steps[1:]:
        assert " held" in _node(text, declared[later])
    assert text.count('class="edge held"') == 2


def test_a_large_workflow_is_summarised_by_level_and_status(staff: Person, worker_rctx) -> None:
    wf = Workflow()
    wf.group([noop(n, "wf-big") for n in range(GRAPH_MAX + 100)], on_success=noop(0))
    declared = api.enqueue_workflow(staff.ctx, wf)
    dead = run_one(worker_rctx, "wf-big", error="PermanentError: no")
    text = staff.client.get(page_of(declared.workflow_id)).text
    assert 'class="node ' not in text, "not drawn node by node"
    summary = text[text.index('id="graph-summary"') : text.index('id="blockers"')]
    assert f"{GRAPH_MAX + 101} steps" in summary
    assert '<strong class="dead-count">1 dead</strong>' in summary
    assert '<strong class="held-count">1</strong> waiting step' in summary
    level0 = re.search(r'id="level-0">(.*?)</tr>', summary, re.S).group(1)  # type: ignore[union-attr]
    assert f'<td class="total">{GRAPH_MAX + 100}</td>' in level0
    assert f'<td class="n-pending">{GRAPH_MAX + 99}</td>' in level0
    assert '<td class="n-failed">1</td>' in level0
    level1 = re.search(r'id="level-1">(.*?)</tr>', summary, re.S).group(1)  # type: ignore[union-attr]
    assert '<td class="total">1</td>' in level1 and '<td class="n-waiting">1</td>' in level1
    assert f"{DEAD}{dead.id}/change/" in text  # linked from what holds it up
    # The steps' later pages read no graph.
    following = re.search(r'href="\?after=([0-9a-f-]{36})" id="next-page"', text)
    assert following
    later = staff.client.get(f"{page_of(declared.workflow_id)}?after={following.group(1)}")
    assert 'id="graph-summary"' not in later.text


@pytest.mark.slow
def test_a_workflow_of_100000_steps_is_summarised(staff: Person, capsys) -> None:
    wf = Workflow()
    wf.group([noop(n, "wf-huge") for n in range(100_000)], on_success=noop(0))
    declared = api.enqueue_workflow(staff.ctx, wf)
    started = time.monotonic()
    text = staff.client.get(page_of(declared.workflow_id)).text
    took = time.monotonic() - started
    with capsys.disabled():
        print(f"\nworkflow page of 100,001 steps drawn in {took:.2f} s")
    assert "100001 steps: too many to draw" in text
    assert 'class="node ' not in text
    assert '<td class="n-pending">100000</td>' in text and '<td class="n-waiting">1</td>' in text
