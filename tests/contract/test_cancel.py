"""Cancel (issue 20): a pending item at once and never claimed; a claimed one by a request its
holder's lease renewal reports, ended under its claim token; bulk by a filter, bounded per
statement and resumable; each audited with the actor, under the item's tenant."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from audit.models import AuditEntry
from tenancy.contexts import OpContext, Role
from tests.factories import UserFactory
from tests.helpers import back_date, row
from workqueue import api, runtime, settle
from workqueue.cancel import (
    cancel_drawn,
    cancel_held,
    is_cancel_requested,
    operator_cancel_matching,
)
from workqueue.claim import claim
from workqueue.models import Status, WorkItem
from workqueue.settle import complete
from workqueue.triage import Drawn
from wqcore.store import aclose_async_store


def _entries(item_id: uuid.UUID) -> list[AuditEntry]:
    return list(
        AuditEntry.objects.using("admin").filter(subject_id=str(item_id)).order_by("created_at")
    )


def _claim(worker_rctx, item_id: uuid.UUID, lane: str = "default"):  # type: ignore[no-untyped-def]
    for pair in claim(worker_rctx, lane, ["NOOP"], "w1", 30, 100):
        if pair[1].id == item_id:
            return pair
    raise AssertionError("not claimed")


def _operator(ctx: OpContext) -> OpContext:
    return OpContext(ctx.org_id, UserFactory().pk, Role.ADMIN, ctx.rctx)


def test_a_pending_item_is_cancelled_at_once_audited_and_never_claimed(
    ctx: OpContext, worker_rctx
) -> None:
    operator = _operator(ctx)
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    cancelled = api.cancel(operator, item.id)
    assert cancelled.status == Status.CANCELLED and cancelled.cancel_requested_at is not None
    assert claim(worker_rctx, "default", ["NOOP"], "w1", 30, 100) == []
    assert row(item.id).status == Status.CANCELLED
    [entry] = _entries(item.id)
    assert (entry.action, entry.actor, entry.org_id) == (
        "work.cancelled",
        operator.user_id,
        ctx.org_id,
    )
    assert entry.request_id == operator.request_id
    assert entry.data["status"] == "pending" and entry.data["payload"] == {"n": 1}
    # Asked again: the same answer, no second entry.
    assert api.cancel(operator, item.id).status == Status.CANCELLED
    assert len(_entries(item.id)) == 1


def test_a_running_item_gets_a_request_its_renewal_reports_and_its_holder_ends_it(
    ctx: OpContext, worker_rctx
) -> None:
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    item_ctx, held = _claim(worker_rctx, item.id)
    asked = api.cancel(_operator(ctx), item.id)
    assert asked.status == Status.CLAIMED and is_cancel_requested(asked)
    assert _entries(item.id)[-1].action == "work.cancel_requested"
    # The renewal still renews it, and says so.
    renewed = settle.extend_leases([runtime.Fence.of(held)], 30)
    assert renewed == {item.id} and renewed.cancel_requested == {item.id}
    ended = cancel_held(item_ctx, held, "cancelled as asked while it ran")
    assert ended.status == Status.CANCELLED and ended.claim_token is None
    assert _entries(item.id)[-1].action == "work.cancelled"
    # A late write of the same holder is refused by the token.
    with pytest.raises(api.Conflict):
        complete(item_ctx, held)
    with pytest.raises(api.Conflict):
        cancel_held(item_ctx, held, "again")
    assert row(item.id).status == Status.CANCELLED


def test_the_renewal_reports_nothing_for_items_nobody_cancelled(ctx, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    _, held = _claim(worker_rctx, item.id)
    renewed = settle.extend_leases([runtime.Fence.of(held)], 30)
    assert renewed == {item.id} and renewed.cancel_requested == frozenset()


def test_async_face_reports_the_request_too(ctx: OpContext, worker_rctx) -> None:
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    item_ctx, held = _claim(worker_rctx, item.id)
    operator = _operator(ctx)

    async def go():  # type: ignore[no-untyped-def]
        try:
            await api.acancel(operator, item.id)
            renewed = await runtime.aextend_leases([runtime.Fence.of(held)], 30)
            ended = await runtime.acancel_held(item_ctx, held, "asked")
            return renewed, ended
        finally:
            await aclose_async_store()

    renewed, ended = asyncio.run(go())
    assert renewed.cancel_requested == {item.id} and ended.status == Status.CANCELLED


@pytest.mark.parametrize("how", ["retry", "release", "snooze"])
def test_a_holder_that_hands_back_a_cancelled_item_ends_it_cancelled(
    ctx: OpContext, worker_rctx, how: str
) -> None:
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    item_ctx, held = _claim(worker_rctx, item.id)
    api.cancel(_operator(ctx), item.id)
    if how == "retry":
        after = settle.fail(item_ctx, held, "boom")
    elif how == "release":
        after = settle.release(item_ctx, held, "shutdown")
    else:
        after = settle.defer(item_ctx, held, 60, "snoozed")
    assert after.status == Status.CANCELLED
    assert claim(worker_rctx, "default", ["NOOP"], "w2", 30, 100) == []


def test_the_sweep_ends_a_dead_holders_cancelled_item_cancelled(ctx, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    from tenancy.contexts import service_context

    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    _claim(worker_rctx, item.id)
    api.cancel(_operator(ctx), item.id)
    back_date(item.id, lease_expires_at=90)
    moved = runtime.requeue_stale(service_context(worker_rctx, ctx.org_id))
    assert (moved.requeued, moved.dead_lettered, moved.cancelled) == (0, 0, 1)
    assert row(item.id).status == Status.CANCELLED
    assert _entries(item.id)[-1].action == "work.cancelled"


@pytest.mark.parametrize("final", ["done", "failed"])
def test_a_final_item_is_a_conflict_and_unchanged(ctx, worker_rctx, final: str) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    item_ctx, held = _claim(worker_rctx, item.id)
    if final == "done":
        complete(item_ctx, held)
    else:
        settle.fail(item_ctx, held, "no", permanent=True)
    before = row(item.id)
    with pytest.raises(api.Conflict, match=f"is {final}"):
        api.cancel(_operator(ctx), item.id)
    assert row(item.id).updated_at == before.updated_at


def test_another_tenants_item_and_a_forged_id_are_not_found(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    other = make_ctx()
    with pytest.raises(api.NotFound):
        api.cancel(other, item.id)
    with pytest.raises(api.NotFound):
        api.cancel(other, uuid.uuid4())
    with pytest.raises(api.InvalidPayload, match=r"^id:"):
        api.cancel(other, "not-a-uuid")
    assert row(item.id).status == Status.PENDING
    assert _entries(item.id) == []


def test_cancel_drawn_is_fenced_on_what_the_operator_saw(ctx, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    operator = _operator(ctx)
    fresh, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    moved, _ = api.enqueue(ctx, "NOOP", {"n": 2})
    running, _ = api.enqueue(ctx, "NOOP", {"n": 3}, lane="other")
    drawn = [Drawn.of(row(fresh.id)), Drawn.of(row(moved.id))]
    back_date(moved.id, updated_at=5)  # changed since the page was drawn
    _claim(worker_rctx, running.id, lane="other")
    drawn.append(Drawn.of(row(running.id)))
    settle.extend_leases([runtime.Fence.of(row(running.id))], 30)  # its updated_at moves: still ok
    result = cancel_drawn(operator, drawn)
    assert {i.id for i in result.changed} == {fresh.id, running.id}
    assert result.refused == [moved.id]
    assert row(fresh.id).status == Status.CANCELLED
    assert is_cancel_requested(row(running.id))
    assert row(moved.id).status == Status.PENDING
    with pytest.raises(api.InvalidPayload, match="cancel acts on"):
        cancel_drawn(operator, [Drawn.of(row(fresh.id))])


def test_bulk_cancel_is_bounded_per_statement_resumable_and_audited(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    mine = api.enqueue_many(ctx, [api.NewItem("NOOP", {"n": i}) for i in range(25)])
    theirs = api.enqueue_many(other, [api.NewItem("NOOP", {"n": i}) for i in range(5)])
    api.enqueue(ctx, "NOTIFY_SHIPMENT", {"shipment_id": str(uuid.uuid4()), "version": 1})
    first = api.cancel_matching(ctx, "NOOP", batch=10, max_batches=2)
    assert (first.cancelled, first.batches, first.finished) == (20, 2, False)
    rest = api.cancel_matching(ctx, "NOOP", batch=10)
    assert (rest.cancelled, rest.batches, rest.finished) == (5, 1, True)
    ids = [item_id for item_id, _ in mine]
    assert WorkItem.objects.using("admin").filter(id__in=ids, status="cancelled").count() == 25
    # Another tenant's items, and another kind's, are untouched.
    other_ids = [item_id for item_id, _ in theirs]
    assert WorkItem.objects.using("admin").filter(id__in=other_ids, status="pending").count() == 5
    assert (
        WorkItem.objects.using("admin").filter(kind="NOTIFY_SHIPMENT", status="pending").count()
        == 1
    )
    entries = AuditEntry.objects.using("admin").filter(action="work.cancelled")
    assert entries.count() == 25 and {e.actor for e in entries} == {ctx.user_id}


def test_the_operators_bulk_cancel_reaches_every_tenant_or_one(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    api.enqueue_many(ctx, [api.NewItem("NOOP", {"n": i}) for i in range(3)])
    api.enqueue_many(other, [api.NewItem("NOOP", {"n": i}) for i in range(4)])
    one = operator_cancel_matching("ops", "NOOP", org_id=other.org_id)
    assert one.cancelled == 4
    rest = operator_cancel_matching("ops", "NOOP")
    assert rest.cancelled == 3 and rest.finished
    entries = AuditEntry.objects.using("admin").filter(action="work.cancelled")
    assert entries.count() == 7 and {e.actor for e in entries} == {"ops"}
    assert {e.org_id for e in entries} == {ctx.org_id, other.org_id}


def test_bulk_cancel_refuses_a_bad_filter_naming_the_field(ctx) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(api.InvalidPayload, match=r"^status:"):
        api.cancel_matching(ctx, "NOOP", statuses=["done"])
    with pytest.raises(api.InvalidPayload, match=r"^kind:"):
        api.cancel_matching(ctx, "")
    with pytest.raises(api.InvalidPayload, match=r"^batch:"):
        api.cancel_matching(ctx, "NOOP", batch=0)


def test_cancelled_items_are_purged_like_discarded_ones(ctx, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    from workers.sweep import purge_items
    from workers.sweep.config import SweepSettings

    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    api.cancel(ctx, item.id)
    back_date(item.id, updated_at=31 * 86400)
    purged = purge_items.run_once(worker_rctx, SweepSettings())
    assert purged.failed == 1
    assert not WorkItem.objects.using("admin").filter(pk=item.id).exists()


def test_the_claim_reads_no_cancel_column(committed: None) -> None:
    # Pending items are cancelled by their status alone: the claim's hot path is as it was.
    from workqueue.claim import CLAIM, CLAIM_OLDEST_FIRST

    assert "cancel" not in CLAIM.sql and "cancel" not in CLAIM_OLDEST_FIRST.sql


def test_the_renewal_reports_requests_in_its_one_statement(ctx: OpContext, worker_rctx) -> None:
    from tests.helpers import statements

    item, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    _, held = _claim(worker_rctx, item.id)
    api.cancel(_operator(ctx), item.id)
    with statements("system", "default") as seen:
        renewed = settle.extend_leases([runtime.Fence.of(held)], 30)
    assert renewed.cancel_requested == {item.id}
    assert len([s for s in seen if "extend_leases" in s]) == 1 and len(seen) == 1, seen


def test_the_async_bulk_and_drawn_cancels(ctx: OpContext) -> None:
    api.enqueue_many(ctx, [api.NewItem("NOOP", {"n": i}) for i in range(3)])
    drawn, _ = api.enqueue(ctx, "NOOP", {"n": 9}, lane="other")
    fence = Drawn.of(row(drawn.id))

    async def go():  # type: ignore[no-untyped-def]
        try:
            bulk = await api.acancel_matching(ctx, "NOOP", lane="default", batch=2)
            one = await cancel_drawn.aio(ctx, [fence])
            return bulk, one
        finally:
            await aclose_async_store()

    bulk, one = asyncio.run(go())
    assert (bulk.cancelled, bulk.batches, bulk.finished) == (3, 2, True)
    assert [i.id for i in one.changed] == [drawn.id] and one.refused == []
