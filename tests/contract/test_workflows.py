"""Workflows on real PostgreSQL: steps wait for their parents and become claimable in the
statement that ends the last of them; groups start their callbacks once; a dead step holds what
needs it done; a workflow is declared whole or not at all."""

from __future__ import annotations

import uuid

import pytest
from django.db import connections

from tenancy.contexts import OpContext
from tests.helpers import row, statements
from workqueue import api, claim
from workqueue.enqueue import Outcome
from workqueue.exceptions import InvalidPayload, NotFound
from workqueue.fence import Fence
from workqueue.models import Status, WorkItem
from workqueue.settle import complete, complete_many, fail
from workqueue.triage import Drawn, requeue_dead
from workqueue.workflows import Workflow, declare

pytestmark = pytest.mark.usefixtures("committed")


def noop(n: int) -> api.NewItem:
    return api.NewItem("NOOP", {"n": n})


def claim_all(rctx, limit: int = 1000) -> list[tuple[OpContext, WorkItem]]:  # type: ignore[no-untyped-def]
    return claim.claim(rctx, "default", ["NOOP"], "w1", 30, limit)


def claimed_ns(held: list[tuple[OpContext, WorkItem]]) -> list[int]:
    return sorted(item.payload["n"] for _, item in held)


def complete_all(held: list[tuple[OpContext, WorkItem]]) -> None:
    fences = [Fence.of(item) for _, item in held]
    assert complete_many(fences) == {f.item_id for f in fences}


def stored_count() -> tuple[int, int]:
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM workqueue_workitem),"
            " (SELECT count(*) FROM workqueue_dependency)"
        )
        return cursor.fetchone()


# -- chains --------------------------------------------------------------------------------------


def test_a_chain_of_three_becomes_claimable_in_order(face, ctx, worker_rctx) -> None:
    wf = Workflow()
    a, b, c = wf.chain(noop(1), noop(2), noop(3))
    declared = face.enqueue_workflow(ctx, wf)
    assert declared.outcome == Outcome.INSERTED
    assert [row(declared[s]).status for s in (a, b, c)] == ["pending", "waiting", "waiting"]
    assert {row(i).workflow_id for i in declared.ids} == {declared.workflow_id} == {declared[a]}
    for n in (1, 2, 3):
        held = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
        assert claimed_ns(held) == [n]
        [(item_ctx, item)] = held
        face.complete(item_ctx, item, {"n": n})
    assert face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10) == []
    assert {row(i).status for i in declared.ids} == {Status.DONE}
    # Each step is handed what the one before it returned.
    assert face.parent_results(ctx, declared[a]) == {}
    assert face.parent_results(ctx, declared[b]) == {declared[a]: {"n": 1}}
    assert face.parent_results(ctx, declared[c]) == {declared[b]: {"n": 2}}


def test_a_released_step_is_due_now_and_keeps_a_later_available_at(ctx, worker_rctx) -> None:
    import datetime

    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    wf = Workflow()
    first = wf.step("NOOP", {"n": 1})
    soon = wf.step("NOOP", {"n": 2}, after=[first])
    delayed = wf.step("NOOP", {"n": 3}, after=[first], available_at=later)
    declared = api.enqueue_workflow(ctx, wf)
    complete_all(claim_all(worker_rctx))
    assert row(declared[soon]).status == row(declared[delayed]).status == Status.PENDING
    assert row(declared[soon]).available_at <= row(declared[soon]).updated_at
    assert row(declared[delayed]).available_at == later
    assert claimed_ns(claim_all(worker_rctx)) == [2]


def test_a_step_waits_for_every_parent(ctx, worker_rctx) -> None:
    wf = Workflow()
    left, right = wf.step("NOOP", {"n": 1}), wf.step("NOOP", {"n": 2})
    join = wf.step("NOOP", {"n": 3}, after=[left, right])
    declared = api.enqueue_workflow(ctx, wf)
    [(c1, i1), (c2, i2)] = sorted(claim_all(worker_rctx), key=lambda h: h[1].payload["n"])
    complete(c1, i1)
    assert (row(declared[join]).status, row(declared[join]).waiting_on) == ("waiting", 1)
    complete(c2, i2)
    assert (row(declared[join]).status, row(declared[join]).waiting_on) == ("pending", 0)


# -- groups --------------------------------------------------------------------------------------


def test_a_group_of_1000_starts_each_callback_once(ctx, worker_rctx) -> None:
    wf = Workflow()
    group = wf.group([noop(n) for n in range(1000)], on_success=noop(-1), on_complete=noop(-2))
    declared = api.enqueue_workflow(ctx, wf)
    success, complete_ = declared[group.on_success], declared[group.on_complete]
    assert (row(success).status, row(success).waiting_on) == ("waiting", 1000)
    seen: list[int] = []
    while held := claim.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 100):
        seen += claimed_ns(held)
        complete_all(held)
    # Each member once, then each callback once (claimable only after the last member's batch).
    assert sorted(seen[:1000]) == list(range(1000)) and sorted(seen[1000:]) == [-2, -1]
    assert row(success).waiting_on == row(complete_).waiting_on == 0
    assert api.count_parents(ctx, success) == {"done": 1000}


def test_a_dead_member_holds_on_success_and_starts_on_complete(ctx, worker_rctx) -> None:
    wf = Workflow()
    group = wf.group([noop(n) for n in range(3)], on_success=noop(10), on_complete=noop(20))
    declared = api.enqueue_workflow(ctx, wf)
    held = sorted(claim_all(worker_rctx), key=lambda h: h[1].payload["n"])
    complete_all(held[:2])
    dead_ctx, dead = held[2]
    fail(dead_ctx, dead, "no such address", permanent=True)
    success, finished = declared[group.on_success], declared[group.on_complete]
    assert (row(success).status, row(success).waiting_on) == ("waiting", 1)
    assert (row(finished).status, row(finished).waiting_on) == ("pending", 0)
    assert api.count_parents(ctx, finished) == {"done": 2, "failed": 1}
    assert claimed_ns(claim_all(worker_rctx)) == [20]

    # The dead member requeued and done: on_success goes on; on_complete counted it once.
    requeue_dead(ctx, [Drawn.of(row(dead.id))])
    [(again_ctx, again)] = claim_all(worker_rctx)
    assert again.id == dead.id
    complete_all([(again_ctx, again)])
    assert (row(success).status, row(success).waiting_on) == ("pending", 0)
    assert row(finished).waiting_on == 0
    assert claimed_ns(claim_all(worker_rctx)) == [10]


def test_a_requeued_member_is_waited_for_again_by_on_complete_not_yet_started(
    ctx, worker_rctx
) -> None:
    wf = Workflow()
    group = wf.group([noop(n) for n in range(2)], on_success=noop(10), on_complete=noop(20))
    declared = api.enqueue_workflow(ctx, wf)
    (dead_ctx, dead), (live_ctx, live) = sorted(
        claim_all(worker_rctx), key=lambda h: h[1].payload["n"]
    )
    fail(dead_ctx, dead, "no such address", permanent=True)
    finished = declared[group.on_complete]
    assert (row(finished).status, row(finished).waiting_on) == ("waiting", 1)
    # Requeued before on_complete started: it waits for the member's new end too.
    requeue_dead(ctx, [Drawn.of(row(dead.id))])
    assert (row(finished).status, row(finished).waiting_on) == ("waiting", 2)
    complete(live_ctx, live)
    [(again_ctx, again)] = claim_all(worker_rctx)
    fail(again_ctx, again, "still no such address", permanent=True)
    assert (row(finished).status, row(finished).waiting_on) == ("pending", 0)
    assert row(declared[group.on_success]).waiting_on == 1
    assert api.count_parents(ctx, finished) == {"done": 1, "failed": 1}


def test_discarding_a_dead_member_moves_nothing_it_did_not_move_dying(ctx, worker_rctx) -> None:
    from workqueue.triage import discard

    wf = Workflow()
    group = wf.group([noop(1), noop(2)], on_complete=noop(20))
    declared = api.enqueue_workflow(ctx, wf)
    [(dead_ctx, dead), _] = sorted(claim_all(worker_rctx), key=lambda h: h[1].payload["n"])
    fail(dead_ctx, dead, "gone", permanent=True)
    assert row(declared[group.on_complete]).waiting_on == 1
    discard(ctx, [Drawn.of(row(dead.id))])
    assert row(declared[group.on_complete]).waiting_on == 1


def test_the_callback_reads_its_members_page_by_page(face, ctx, worker_rctx) -> None:
    wf = Workflow()
    group = wf.group([noop(n) for n in range(25)], on_complete=noop(99))
    declared = face.enqueue_workflow(ctx, wf)
    held = claim_all(worker_rctx)
    results = [None if item.payload["n"] == 0 else str(item.payload["n"]) for _, item in held]
    assert complete_many([Fence.of(item) for _, item in held], results) == {i.id for _, i in held}
    callback = declared[group.on_complete]
    pages, after = [], None
    while True:
        page = face.read_parents(ctx, callback, after=after, limit=10)
        pages.append(page.parents)
        if page.next_after is None:
            break
        after = page.next_after
    assert [len(p) for p in pages] == [10, 10, 5]
    members = [p for page in pages for p in page]
    assert [p.id for p in members] == sorted(declared[m] for m in group.members)
    assert {(p.kind, p.status, p.needs, p.met) for p in members} == {
        ("NOOP", "done", "finished", True)
    }
    # Each member's result beside it (member 0 returned None).
    by_n = {declared[m]: n for n, m in enumerate(group.members)}
    assert {p.id: p.result for p in members} == {i: (n or None) for i, n in by_n.items()}
    assert face.parent_results(ctx, callback) == {p.id: p.result for p in members}
    assert face.count_parents(ctx, callback) == {"done": 25}


def test_the_results_of_more_parents_than_one_statement_reads_are_read_page_by_page(ctx) -> None:
    from workqueue.results import READ_MAX

    wf = Workflow()
    group = wf.group([noop(n) for n in range(READ_MAX + 1)], on_complete=noop(-1))
    declared = api.enqueue_workflow(ctx, wf)
    with pytest.raises(InvalidPayload, match="read_parents"):
        api.parent_results(ctx, declared[group.on_complete])


def test_reading_parents_takes_a_bounded_page(ctx) -> None:
    with pytest.raises(InvalidPayload, match="limit"):
        api.read_parents(ctx, uuid.uuid4(), limit=0)


# -- the existing items a step waits for ---------------------------------------------------------


def test_a_step_may_wait_for_an_item_already_enqueued(ctx, worker_rctx) -> None:
    earlier, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    wf = Workflow()
    after = wf.step("NOOP", {"n": 2}, after=[earlier.id])
    declared = api.enqueue_workflow(ctx, wf)
    assert row(declared[after]).status == Status.WAITING and row(earlier.id).has_dependents
    complete_all(claim_all(worker_rctx))
    assert row(declared[after]).status == Status.PENDING


def test_edges_to_items_that_ended_are_met_at_once(ctx, worker_rctx) -> None:
    done, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    dead, _ = api.enqueue(ctx, "NOOP", {"n": 2})
    held = sorted(claim_all(worker_rctx), key=lambda h: h[1].payload["n"])
    complete_all(held[:1])
    fail(*held[1], "gone", permanent=True)
    wf = Workflow()
    ready = wf.step("NOOP", {"n": 3}, after=[done.id], after_finished=[dead.id])
    held_back = wf.step("NOOP", {"n": 4}, after=[dead.id])
    declared = api.enqueue_workflow(ctx, wf)
    assert (row(declared[ready]).status, row(declared[ready]).waiting_on) == ("pending", 0)
    assert (row(declared[held_back]).status, row(declared[held_back]).waiting_on) == (
        "waiting",
        1,
    )


# -- refused before anything is stored -----------------------------------------------------------


def test_a_cycle_is_refused_and_nothing_is_stored(ctx) -> None:
    wf = Workflow()
    a = wf.step("NOOP", {"n": 1})
    b = wf.step("NOOP", {"n": 2}, after=[a])
    c = wf.step("NOOP", {"n": 3}, after=[b])
    wf.edge(c, a)
    with pytest.raises(InvalidPayload, match=r"cycle: steps\[0\] -> steps\[1\] -> steps\[2\]"):
        api.enqueue_workflow(ctx, wf)
    assert stored_count() == (0, 0)


def test_a_missing_parent_is_refused_and_nothing_is_stored(ctx) -> None:
    wf = Workflow()
    wf.step("NOOP", {"n": 1})
    missing = uuid.uuid4()
    wf.step("NOOP", {"n": 2}, after=[missing])
    with pytest.raises(InvalidPayload, match=rf"steps\[1\].after: work item {missing} not found"):
        api.enqueue_workflow(ctx, wf)
    assert stored_count() == (0, 0)


def test_a_parent_of_another_tenant_is_not_found_in_this_one(ctx, make_ctx) -> None:
    theirs, _ = api.enqueue(make_ctx(), "NOOP", {})
    wf = Workflow()
    wf.step("NOOP", {}, after=[theirs.id])
    with pytest.raises(InvalidPayload, match="not found in this tenant"):
        api.enqueue_workflow(ctx, wf)
    assert stored_count() == (1, 0) and not row(theirs.id).has_dependents


def test_an_invalid_step_is_named_and_nothing_is_stored(ctx) -> None:
    wf = Workflow()
    wf.chain(noop(1), api.NewItem("NOOP", {"n": "many"}))
    with pytest.raises(InvalidPayload, match=r"steps\[1\]\.payload"):
        api.enqueue_workflow(ctx, wf)
    wf = Workflow()
    wf.step(api.NewItem("NOOP", {}, idempotency_key="mine"))
    with pytest.raises(InvalidPayload, match=r"steps\[0\]\.idempotency_key"):
        api.enqueue_workflow(ctx, wf)
    assert stored_count() == (0, 0)


def test_waiting_to_be_done_for_a_cancelled_item_is_refused(ctx) -> None:
    item, _ = api.enqueue(ctx, "NOOP", {})
    api.cancel(ctx, item.id)
    wf = Workflow()
    wf.step("NOOP", {}, after=[item.id])
    with pytest.raises(InvalidPayload, match="is cancelled: it will never be done"):
        api.enqueue_workflow(ctx, wf)
    wf = Workflow()
    wf.step("NOOP", {}, after_finished=[item.id])
    assert row(api.enqueue_workflow(ctx, wf).ids[0]).status == Status.PENDING


# -- idempotency ---------------------------------------------------------------------------------


def test_a_retried_declaration_writes_nothing_and_returns_the_first_ids(face, ctx) -> None:
    def declare_once() -> declare.Declared:
        wf = Workflow(key="order-42")
        wf.group([noop(n) for n in range(5)], on_success=noop(9))
        return face.enqueue_workflow(ctx, wf)

    first = declare_once()
    stored = stored_count()
    again = declare_once()
    assert again.outcome == Outcome.KEY_EXISTS and first.outcome == Outcome.INSERTED
    assert (again.ids, again.workflow_id) == (first.ids, first.workflow_id)
    assert stored_count() == stored == (6, 5)


def test_a_workflow_costs_one_statement(ctx) -> None:
    wf = Workflow()
    wf.group([noop(n) for n in range(100)], on_success=noop(-1), on_complete=noop(-2))
    with statements("default", "system") as sent:
        api.enqueue_workflow(ctx, wf)
    assert sent == [declare.ENQUEUE_WORKFLOW.native_sql]


# -- cancel --------------------------------------------------------------------------------------


def test_cancelling_a_workflow_stops_every_step_not_ended(face, ctx, worker_rctx) -> None:
    wf = Workflow()
    first, second = wf.chain(noop(1), noop(2))
    group = wf.group([noop(3), noop(4)], on_complete=noop(5))
    declared = face.enqueue_workflow(ctx, wf)
    held = sorted(claim_all(worker_rctx), key=lambda h: h[1].payload["n"])
    assert claimed_ns(held) == [1, 3, 4]
    complete_all(held[1:2])  # member 3 done
    cancelled = face.cancel_workflow(ctx, declared.workflow_id, reason="order withdrawn")
    assert (cancelled.cancelled, cancelled.requested) == (2, 2)
    assert row(declared[second]).status == Status.CANCELLED
    assert row(declared[second]).last_error == "order withdrawn"
    assert row(declared[group.on_complete]).status == Status.CANCELLED
    assert row(declared[first]).cancel_requested_at is not None
    assert row(declared[group.members[0]]).status == Status.DONE
    assert claim_all(worker_rctx) == []
    again = face.cancel_workflow(ctx, declared.workflow_id)
    assert (again.cancelled, again.requested) == (0, 0)
    with pytest.raises(NotFound):
        face.cancel_workflow(ctx, uuid.uuid4())


def test_cancelling_one_waiting_step_meets_what_needs_it_finished(ctx, worker_rctx) -> None:
    wf = Workflow()
    first = wf.step("NOOP", {"n": 1})
    group = wf.group([noop(2)], after=[first], on_success=noop(3), on_complete=noop(4))
    declared = api.enqueue_workflow(ctx, wf)
    member = declared[group.members[0]]
    assert api.cancel(ctx, member).status == Status.CANCELLED
    assert row(declared[group.on_complete]).status == Status.PENDING
    assert row(declared[group.on_success]).status == Status.WAITING
