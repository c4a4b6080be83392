"""Every attempt remembered: the statement that settles a claim records the attempt it ended
(worker, host, start, end, outcome, error, traceback), in the same round trip; the purge deletes
an item's attempts with it; row-level security keeps each tenant's to itself."""

from __future__ import annotations

from datetime import timedelta

from django.db import connections

from tenancy.scope import tenant_scope
from tests.helpers import back_date, row, statements
from workqueue import api, runtime
from workqueue.inputs import TRACEBACK_MAX
from workqueue.models import Attempt, AttemptOutcome, Status
from workqueue.settle import complete_many

WORKER = "host-a:4242:abc123"


def _attempts(item_id) -> list[Attempt]:  # type: ignore[no-untyped-def]
    return list(Attempt.objects.using("admin").filter(item_id=item_id).order_by("id"))


def _claim_one(face, ctx, worker_rctx, lane: str, worker: str = WORKER):  # type: ignore[no-untyped-def]
    [(item_ctx, held)] = face.claim(worker_rctx, lane, None, worker, 30, 1)
    return item_ctx, held


def test_a_completion_records_its_attempt_in_the_same_statement(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {}, lane="att-done")
    _item_ctx, held = _claim_one(face, ctx, worker_rctx, "att-done")
    assert held.claimed_at is not None
    if face.name == "sync":
        with statements("system") as ran:
            assert face.complete_many([runtime.Fence.of(held)]) == {item.id}
        assert len(ran) == 1  # no round trip of its own
    else:
        assert face.complete_many([runtime.Fence.of(held)]) == {item.id}
    [attempt] = _attempts(item.id)
    assert (attempt.org_id, attempt.attempt, attempt.outcome) == (ctx.org_id, 1, "done")
    assert (attempt.worker, attempt.host) == (WORKER, "host-a")
    assert attempt.started_at == held.claimed_at <= attempt.ended_at
    assert attempt.error == attempt.traceback == ""


def test_each_failure_keeps_its_traceback_and_a_dead_letter_names_its_worker(
    face, ctx, worker_rctx
) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {}, lane="att-fail")
    item_ctx, held = _claim_one(face, ctx, worker_rctx, "att-fail", "host-a:1:aa")
    face.fail(item_ctx, held, "ValueError: first", delay_s=0, traceback="Traceback 1\nValueError")
    item_ctx, held = _claim_one(face, ctx, worker_rctx, "att-fail", "host-b:2:bb")
    long_trace = "Traceback (most recent call last):\n" + "x" * 20_000 + "\nKeyError: 'end'"
    dead = face.fail(item_ctx, held, "KeyError: 'end'", permanent=True, traceback=long_trace)
    assert dead.status == Status.FAILED and dead.claimed_by == "host-b:2:bb"
    first, second = _attempts(item.id)
    assert (first.attempt, first.outcome, first.worker, first.host) == (
        1,
        AttemptOutcome.RETRIED,
        "host-a:1:aa",
        "host-a",
    )
    assert (first.error, first.traceback) == ("ValueError: first", "Traceback 1\nValueError")
    assert (second.attempt, second.outcome, second.host) == (2, "dead_lettered", "host-b")
    # Bounded, keeping the end (the error and where it was raised).
    assert second.traceback.endswith("KeyError: 'end'")
    assert len(second.traceback) <= TRACEBACK_MAX + 40 and "characters cut" in second.traceback
    assert first.ended_at <= second.started_at


def test_an_expired_lease_is_an_attempt_the_sweep_records(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {}, lane="att-stale")
    _claim_one(face, ctx, worker_rctx, "att-stale")
    back_date(item.id, lease_expires_at=90)
    assert face.requeue_stale(ctx).requeued == 1
    [attempt] = _attempts(item.id)
    assert (attempt.outcome, attempt.worker, attempt.error) == (
        "lease_expired",
        WORKER,
        "lease expired",
    )
    assert row(item.id).claimed_by is None  # handed back: held by no one


def test_a_defer_spends_no_attempt_and_records_none(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {}, lane="att-defer")
    item_ctx, held = _claim_one(face, ctx, worker_rctx, "att-defer")
    face.defer(item_ctx, held, 0)
    assert _attempts(item.id) == []


def test_attempts_are_purged_with_their_item(face, ctx, worker_rctx) -> None:
    old, _ = api.enqueue(ctx, "NOOP", {}, lane="att-purge")
    _item_ctx, held = _claim_one(face, ctx, worker_rctx, "att-purge")
    complete_many([runtime.Fence.of(held)])
    kept, _ = api.enqueue(ctx, "NOOP", {}, lane="att-purge")
    _item_ctx, held = _claim_one(face, ctx, worker_rctx, "att-purge")
    complete_many([runtime.Fence.of(held)])
    back_date(old.id, updated_at=7200)
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now() - interval '1 hour'")
        cutoff = cursor.fetchone()[0]
    assert runtime.purge_items(worker_rctx, cutoff) == 1
    assert _attempts(old.id) == [] and len(_attempts(kept.id)) == 1


def test_another_tenant_sees_no_attempt(face, ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    item, _ = face.enqueue(ctx, "NOOP", {}, lane="att-rls")
    item_ctx, held = _claim_one(face, ctx, worker_rctx, "att-rls")
    face.fail(item_ctx, held, "boom", permanent=True, traceback="Traceback: secret")
    for org_id, seen in ((ctx.org_id, 1), (other.org_id, 0)):
        with tenant_scope(org_id), connections["default"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM workqueue_attempt WHERE item_id = %s", [item.id])
            assert cursor.fetchone()[0] == seen
    assert (
        Attempt.objects.using("default").filter(item_id=item.id).count() == 0
    )  # no tenant named: row-level security shows nothing
    assert timedelta(0) <= _attempts(item.id)[0].ended_at - held.claimed_at
