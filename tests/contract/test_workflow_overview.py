"""A workflow as the admin reads it, on real PostgreSQL: each step's place and callback written
by the declaration and purged with its item; steps page by page; counts by status (done ones
counted without reading them); the steps that hold the rest up; the callbacks and whether they
fired; what a dead letter holds up; each reading in its tenant only."""

from __future__ import annotations

import uuid

import pytest
from django.db import connections

from tests.helpers import row
from workqueue import api, claim, maintenance
from workqueue.models import Status, WorkflowStep
from workqueue.settle import complete, fail
from workqueue.triage import Drawn, requeue_dead
from workqueue.workflows import Workflow, overview

pytestmark = pytest.mark.usefixtures("committed")


def noop(n: int, lane: str = "default") -> api.NewItem:
    return api.NewItem("NOOP", {"n": n}, lane=lane)


def run_one(rctx, lane: str = "default", error: str | None = None):  # type: ignore[no-untyped-def]
    """Claim one item of ``lane`` and complete it (or fail it for good with ``error``)."""
    [(item_ctx, held)] = claim.claim(rctx, lane, ["NOOP"], "w1", 30, 1)
    if error is None:
        return complete(item_ctx, held, {"n": held.payload["n"]})
    return fail(item_ctx, held, error, permanent=True)


def group_with_callbacks(ctx, members: int = 3):  # type: ignore[no-untyped-def]
    wf = Workflow()
    head = wf.step(noop(0))
    group = wf.group(
        [noop(n, lane="members") for n in range(1, members + 1)],
        after=[head],
        on_success=noop(100),
        on_complete=noop(101),
    )
    return api.enqueue_workflow(ctx, wf), head, group


def test_the_declaration_writes_each_steps_place_and_callback(ctx) -> None:
    declared, _, group = group_with_callbacks(ctx)
    steps = {s.item_id: s for s in WorkflowStep.objects.using("admin").all()}
    assert set(steps) == set(declared.ids)
    assert {s.workflow_id for s in steps.values()} == {declared.workflow_id}
    assert [steps[i].place for i in declared.ids] == list(range(len(declared.ids)))
    callbacks = {i: steps[i].callback for i in declared.ids if steps[i].callback}
    assert callbacks == {
        declared[group.on_success]: "on_success",
        declared[group.on_complete]: "on_complete",
    }
    # A retried keyed declaration writes no second set.
    wf = Workflow(key="once")
    wf.chain(noop(1), noop(2))
    first = api.enqueue_workflow(ctx, wf)
    again = api.enqueue_workflow(ctx, wf)
    assert again.ids == first.ids
    assert WorkflowStep.objects.using("admin").filter(workflow_id=first.workflow_id).count() == 2


def test_steps_page_by_page_with_their_parents(ctx) -> None:
    declared, head, group = group_with_callbacks(ctx, members=4)
    seen, after, pages = [], None, 0
    while True:
        page = overview.read_steps(ctx.org_id, declared.workflow_id, after=after, limit=3)
        seen += page.steps
        pages += 1
        if page.next_after is None:
            break
        after = page.next_after
    assert pages == 3 and len(seen) == 7
    assert [s.id for s in seen] == sorted(declared.ids)
    by_id = {s.id: s for s in seen}
    success = by_id[declared[group.on_success]]
    assert success.callback == "on_success" and success.status == Status.WAITING
    assert success.parents == 4 and success.waiting_on == 4
    assert [p.needs for p in success.first_parents] == ["done"] * 4
    assert sorted(p.place for p in success.first_parents) == [1, 2, 3, 4]
    assert by_id[declared[group.on_complete]].first_parents[0].needs == "finished"
    assert by_id[declared[head]].parents == 0 and by_id[declared[head]].first_parents == []


def test_counts_blockers_and_callbacks_as_the_workflow_runs(ctx, worker_rctx) -> None:
    declared, _, _ = group_with_callbacks(ctx)
    wid = declared.workflow_id
    assert overview.read_counts(ctx.org_id, wid) == {"waiting": 5, "pending": 1}
    run_one(worker_rctx)  # the head: the members become pending
    run_one(worker_rctx, "members")
    run_one(worker_rctx, "members")
    dead = run_one(worker_rctx, "members", error="PermanentError: no")
    assert overview.read_counts(ctx.org_id, wid) == {
        "waiting": 1,
        "pending": 1,
        "done": 3,
        "failed": 1,
    }
    # The dead member holds on_success (which needs it done); on_complete went on.
    [blocker] = overview.read_blockers(ctx.org_id, wid)
    assert (blocker.id, blocker.status, blocker.waiting, blocker.place) == (dead.id, "failed", 1, 3)
    assert blocker.error == "PermanentError: no"
    callbacks = {c.callback: c for c in overview.read_callbacks(ctx.org_id, wid)}
    assert not callbacks["on_success"].fired and callbacks["on_success"].waiting_on == 1
    assert callbacks["on_complete"].fired and callbacks["on_complete"].status == Status.PENDING
    assert callbacks["on_success"].parents == 3
    held = overview.read_holding([dead.id])
    assert held[dead.id].workflow_id == wid and held[dead.id].waiting == 1
    assert held[dead.id].workflows == [wid]
    # Requeued and done, it lets on_success go: nothing holds the workflow any more.
    requeue_dead(ctx, [Drawn.of(row(dead.id))])
    run_one(worker_rctx, "members")
    assert overview.read_blockers(ctx.org_id, wid) == []
    assert overview.read_counts(ctx.org_id, wid) == {"pending": 2, "done": 4}
    assert all(c.fired for c in overview.read_callbacks(ctx.org_id, wid))


def test_a_discarded_step_holds_its_dependents_for_good(ctx, worker_rctx) -> None:
    wf = Workflow()
    first, _ = wf.chain(noop(1), noop(2))
    declared = api.enqueue_workflow(ctx, wf)
    run_one(worker_rctx, error="PermanentError: no")
    from workqueue.triage import discard

    discard(ctx, [Drawn.of(row(declared[first]))])
    [blocker] = overview.read_blockers(ctx.org_id, declared.workflow_id)
    assert (blocker.status, blocker.waiting) == ("discarded", 1)
    api.cancel_workflow(ctx, declared.workflow_id, "stuck")
    assert overview.read_blockers(ctx.org_id, declared.workflow_id) == []
    assert overview.read_counts(ctx.org_id, declared.workflow_id) == {
        "discarded": 1,
        "cancelled": 1,
    }


def test_another_tenants_workflow_reads_as_nothing_under_row_level_security(
    ctx, make_ctx, worker_rctx
) -> None:
    declared, _, _ = group_with_callbacks(ctx)
    other = make_ctx()
    wid = declared.workflow_id
    assert overview.read_steps(ctx.org_id, wid, scope=other.org_id).steps == []
    assert overview.read_counts(ctx.org_id, wid, scope=other.org_id) == {}
    assert overview.read_callbacks(ctx.org_id, wid, scope=other.org_id) == []
    # Read as its own tenant, or by the operator (no scope), it is there.
    assert len(overview.read_steps(ctx.org_id, wid, scope=ctx.org_id).steps) == 6
    assert len(overview.read_steps(ctx.org_id, wid).steps) == 6
    # Named with another tenant, the operator's reading finds none of it either.
    assert overview.read_steps(other.org_id, wid).steps == []


def test_a_purged_step_takes_its_place_with_it(ctx, worker_rctx) -> None:
    wf = Workflow()
    wf.chain(noop(1), noop(2))
    declared = api.enqueue_workflow(ctx, wf)
    run_one(worker_rctx)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_workitem SET updated_at = now() - interval '1 day' WHERE id = %s",
            [declared.ids[0]],
        )
    purged = maintenance.purge_items(worker_rctx, before_s_ago(3600))
    assert purged == 1
    assert list(WorkflowStep.objects.using("admin").values_list("item_id", flat=True)) == [
        declared.ids[1]
    ]
    assert overview.read_counts(ctx.org_id, declared.workflow_id) == {"pending": 1}


def before_s_ago(seconds: float):  # type: ignore[no-untyped-def]
    import datetime

    return datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds)


def test_unknown_ids_hold_nothing(ctx) -> None:
    assert overview.read_holding([uuid.uuid4()]) == {}
    assert overview.read_holding([]) == {}
