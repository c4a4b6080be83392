"""The sweep's work-item operations: requeue stale claims, purge, gauges."""

from __future__ import annotations

import pytest
from django.db import connections

from tenancy.contexts import SYSTEM_ACTOR
from tests.helpers import back_date, row
from workqueue import api, runtime
from workqueue.kinds import all_kinds
from workqueue.maintenance import read_gauges
from workqueue.models import Status
from workqueue.rules import is_exhausted
from workqueue.runtime import purge_items


def _db_now():
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_requeue_stale_hands_back_expired_claims_only(face, ctx, worker_rctx) -> None:
    a, _ = face.enqueue(ctx, "NOOP", {})
    b, _ = face.enqueue(ctx, "NOOP", {})
    face.claim(worker_rctx, "default", None, "w1", 30, 2)
    back_date(a.id, lease_expires_at=90)
    result = face.requeue_stale(ctx)
    assert (result.requeued, result.dead_lettered) == (1, 0)
    stale = row(a.id)
    assert (stale.status, stale.claim_token, stale.attempts, stale.updated_by) == (
        Status.PENDING,
        None,
        1,
        SYSTEM_ACTOR,
    )
    assert row(b.id).status == Status.CLAIMED


def test_requeue_stale_of_one_tenant_leaves_anothers_stale_item(
    face, ctx, make_ctx, worker_rctx
) -> None:
    other = make_ctx()
    mine, _ = face.enqueue(ctx, "NOOP", {})
    theirs, _ = face.enqueue(other, "NOOP", {})
    face.claim(worker_rctx, "default", None, "w1", 30, 2)
    back_date(mine.id, lease_expires_at=90)
    back_date(theirs.id, lease_expires_at=90)
    assert face.requeue_stale(ctx).requeued == 1
    assert row(theirs.id).status == Status.CLAIMED


def test_requeue_stale_honours_before_and_limit(face, ctx, worker_rctx) -> None:
    items = [face.enqueue(ctx, "NOOP", {})[0] for _ in range(3)]
    face.claim(worker_rctx, "default", None, "w1", 30, 3)
    for item in items:
        back_date(item.id, lease_expires_at=10)
    assert face.requeue_stale(ctx, before=_db_now().replace(year=2000)).requeued == 0
    assert face.requeue_stale(ctx, limit=2).requeued == 2
    assert face.requeue_stale(ctx, limit=2).requeued == 1


def test_a_poison_item_ends_failed_after_exactly_max_attempts_claims(
    face, ctx, worker_rctx
) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})  # max_attempts 3
    claims = 0
    while row(item.id).status != Status.FAILED:
        got = face.claim(worker_rctx, "default", None, "crashy", 30, 1)
        if got:
            claims += 1
        # the worker dies holding the item; its lease runs out
        back_date(item.id, lease_expires_at=1)
        face.requeue_stale(ctx)
        assert claims <= 3
    assert claims == 3 and row(item.id).attempts == 3
    assert row(item.id).last_error == "lease expired; attempts spent"


@pytest.mark.parametrize(("attempts", "max_attempts"), [(0, 3), (2, 3), (3, 3), (4, 3), (1, 1)])
def test_the_stale_filter_spells_is_exhausted(
    face, ctx, worker_rctx, attempts, max_attempts
) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    face.claim(worker_rctx, "default", None, "w1", 30, 1)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_workitem SET attempts = %s, max_attempts = %s,"
            " lease_expires_at = now() - interval '1 minute' WHERE id = %s",
            [attempts, max_attempts, item.id],
        )
    face.requeue_stale(ctx)
    expected = Status.FAILED if is_exhausted(attempts, max_attempts) else Status.PENDING
    assert row(item.id).status == expected


def test_purge_removes_old_finished_items_in_every_tenant(face, ctx, make_ctx, worker_rctx) -> None:
    from datetime import timedelta

    from workqueue.models import WorkItem

    def claimed_one(c):
        face.enqueue(c, "NOOP", {})
        [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
        return item_ctx, held

    purged, kept = set(), set()
    for c in (ctx, make_ctx()):
        old_done = face.complete(*claimed_one(c))
        old_dead = face.fail(*claimed_one(c), "x", permanent=True)
        fresh_done = face.complete(*claimed_one(c))
        _, old_claimed = claimed_one(c)
        old_pending, _ = face.enqueue(c, "NOOP", {}, lane="idle")
        for item in (old_done, old_dead, old_claimed, old_pending):
            back_date(item.id, updated_at=7200)
        purged |= {old_done.id, old_dead.id}
        kept |= {fresh_done.id, old_claimed.id, old_pending.id}
    cutoff = _db_now() - timedelta(hours=1)
    # batches of 3 over 4 old items: one full batch, then one short batch ends it
    assert purge_items(worker_rctx, cutoff, batch=3) == 4
    left = set(WorkItem.objects.using("admin").values_list("id", flat=True))
    assert left == kept


def test_gauges_read_the_oldest_wait_and_counts(face, ctx, worker_rctx, settings) -> None:
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "bulk"]}
    waiting, _ = face.enqueue(ctx, "NOOP", {})
    face.enqueue(ctx, "NOOP", {}, lane="bulk")
    back_date(waiting.id, available_at=120)
    future, _ = face.enqueue(ctx, "NOOP", {})
    back_date(future.id, available_at=-3600)
    face.enqueue(ctx, "NOTIFY_SHIPMENT", {"shipment_id": str(waiting.id), "version": 1})
    [(c, held)] = face.claim(worker_rctx, "default", ["NOTIFY_SHIPMENT"], "w1", 30, 1)
    face.fail(c, held, "bad", permanent=True)
    gauges = read_gauges(worker_rctx)
    assert 119 < gauges.oldest_age_s < 130
    assert gauges.failed == 1
    assert gauges.counts == {
        ("default", "NOOP", "pending"): 2,
        ("bulk", "NOOP", "pending"): 1,
        ("default", "NOTIFY_SHIPMENT", "failed"): 1,
    }


def test_the_gauges_count_undeclared_lanes_as_one(ctx, worker_rctx, settings) -> None:
    # Found by an outside suite: every lane a caller made up was a new row of the gauges read
    # (and new series on every /metrics). Undeclared lanes are one group, whatever their number.
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "bulk"]}
    api.enqueue_many(ctx, [api.NewItem("NOOP", {}, lane=f"made-up-{n}") for n in range(50)])
    api.enqueue(ctx, "NOOP", {}, lane="bulk")
    gauges = read_gauges(worker_rctx)
    assert gauges.counts == {
        ("bulk", "NOOP", "pending"): 1,
        (runtime.UNDECLARED, "NOOP", "pending"): 50,
    }
    assert {(t.lane, t.items) for t in runtime.read_top_tenants()} == {
        (runtime.UNDECLARED, 50),
        ("bulk", 1),
    }


def test_the_undeclared_label_is_the_one_the_statements_write() -> None:
    from workqueue.maintenance import READ_GAUGES, READ_TOP_TENANTS

    for statement in (READ_GAUGES, READ_TOP_TENANTS):
        assert f"'{runtime.UNDECLARED}'" in statement.sql


def test_declared_lanes_are_the_settings_the_kinds_and_the_task_queues(settings) -> None:
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "reports"]}
    lanes = runtime.declared_lanes()
    assert {"default", "reports"} <= set(lanes)
    assert {kind.lane for kind in all_kinds()} <= set(lanes)
    assert set(settings.TASKS["default"]["QUEUES"]) <= set(lanes)
