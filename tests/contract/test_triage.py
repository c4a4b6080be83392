"""Triage of dead letters: requeue (now, later), discard, edit then requeue; each fenced on what
the operator saw, audited in the same statement, under the item's tenant."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from django.db import connections, transaction

from audit.models import AuditEntry
from tenancy.contexts import OpContext, Role
from tests.factories import UserFactory
from tests.helpers import back_date, row
from workqueue import api, runtime
from workqueue import triage as dead_letters
from workqueue.claim import claim
from workqueue.models import Status, WorkItem
from workqueue.settle import fail
from wqcore.store import aclose_async_store


def _dead(ctx: OpContext, worker_rctx, payload: dict | None = None, error: str = "boom"):  # type: ignore[no-untyped-def]
    """A dead letter of ``ctx``'s tenant: enqueued, claimed, failed for good."""
    item, _ = api.enqueue(ctx, "NOOP", payload or {"n": 1})
    [(item_ctx, held)] = [
        pair
        for pair in claim(worker_rctx, "default", ["NOOP"], "w1", 30, 100)
        if pair[1].id == item.id
    ]
    return fail(item_ctx, held, error, permanent=True)


def _audit(item_id) -> list[AuditEntry]:  # type: ignore[no-untyped-def]
    return list(
        AuditEntry.objects.using("admin")
        .filter(subject_id=str(item_id))
        .exclude(action="work.dead_lettered")
        .order_by("created_at")
    )


def _db_now():  # type: ignore[no-untyped-def]
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_requeue_now_resets_attempts_keeps_the_error_in_history_and_announces(
    ctx: OpContext, worker_rctx
) -> None:
    # The operator: a user acting in ctx's tenant (the audit entries name them).
    operator = OpContext(ctx.org_id, UserFactory().pk, Role.ADMIN, ctx.rctx)
    dead = _dead(ctx, worker_rctx, error="Traceback: the gateway said no\nline 2")
    assert (dead.status, dead.attempts) == (Status.FAILED, 1)
    params = connections["admin"].get_connection_params()
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute("LISTEN work_available")
        result = dead_letters.requeue_dead(operator, [dead_letters.Drawn.of(dead)])
        [notice] = list(listener.notifies(timeout=5, stop_after=1))
    assert notice.payload == "default"
    assert result.refused == [] and [i.id for i in result.changed] == [dead.id]
    now = row(dead.id)
    assert (now.status, now.attempts, now.last_error) == (Status.PENDING, 0, "")
    assert now.claim_token is None and now.lease_expires_at is None
    assert now.available_at <= _db_now()
    [entry] = _audit(dead.id)
    assert entry.action == "work.requeued"
    assert (entry.actor, entry.org_id) == (operator.user_id, ctx.org_id)
    assert entry.request_id == operator.request_id
    assert entry.data["error"] == "Traceback: the gateway said no\nline 2"
    assert entry.data["attempts"] == 1 and entry.data["kind"] == "NOOP"
    # Claimable again, with a fresh count of attempts.
    [(_, again)] = claim(worker_rctx, "default", ["NOOP"], "w2", 30, 10)
    assert again.id == dead.id and again.attempts == 1


def test_requeue_with_a_delay_is_due_later(ctx: OpContext, worker_rctx) -> None:
    dead = _dead(ctx, worker_rctx)
    before = _db_now()
    dead_letters.requeue_dead(ctx, [dead_letters.Drawn.of(dead)], delay_s=600)
    delay = row(dead.id).available_at - before
    assert timedelta(seconds=599) < delay < timedelta(seconds=610)
    assert claim(worker_rctx, "default", ["NOOP"], "w2", 30, 10) == []
    assert _audit(dead.id)[0].data["delay_s"] == 600


def test_an_item_changed_since_the_page_was_drawn_is_left_alone(
    ctx: OpContext, worker_rctx
) -> None:
    dead = _dead(ctx, worker_rctx)
    drawn = dead_letters.Drawn.of(dead)
    # Someone else requeued it meanwhile, and a worker claimed it.
    dead_letters.requeue_dead(ctx, [drawn])
    claim(worker_rctx, "default", ["NOOP"], "w2", 30, 10)
    for action in (
        lambda: dead_letters.requeue_dead(ctx, [drawn]),
        lambda: dead_letters.discard(ctx, [drawn]),
    ):
        result = action()
        assert result.changed == [] and result.refused == [dead.id]
    with pytest.raises(api.Conflict, match="changed since the page was drawn"):
        dead_letters.requeue_edited(ctx, drawn, {"n": 9})
    now = row(dead.id)
    assert (now.status, now.payload) == (Status.CLAIMED, {"n": 1})
    assert [e.action for e in _audit(dead.id)] == ["work.requeued"]


def test_a_failed_item_failed_again_since_it_was_drawn_is_left_alone(
    ctx: OpContext, worker_rctx
) -> None:
    """Same status, later updated_at: the fence is the pair, not the status alone."""
    dead = _dead(ctx, worker_rctx)
    drawn = dead_letters.Drawn.of(dead)
    back_date(dead.id, updated_at=-1)  # any write moves updated_at
    assert dead_letters.requeue_dead(ctx, [drawn]).refused == [dead.id]
    assert row(dead.id).status == Status.FAILED


def test_a_fence_that_crosses_a_concurrent_write_is_refused_after_it_commits(
    ctx: OpContext, worker_rctx
) -> None:
    """The row is locked by another transaction that then commits a change: the requeue waits,
    re-checks the fence on the committed row, and leaves it alone."""
    dead = _dead(ctx, worker_rctx)
    drawn = dead_letters.Drawn.of(dead)
    params = connections["admin"].get_connection_params()
    with psycopg.connect(**params) as other:
        other.execute(
            "UPDATE workqueue_workitem SET updated_at = now() + interval '1 second' WHERE id = %s",
            [dead.id],
        )
        results: list[dead_letters.Triaged] = []

        def requeue() -> None:
            try:
                results.append(dead_letters.requeue_dead(ctx, [drawn]))
            finally:
                connections.close_all()

        thread = threading.Thread(target=requeue)
        thread.start()
        time.sleep(0.3)
        assert thread.is_alive(), "the requeue waits for the other transaction's row lock"
        other.commit()
        thread.join(10)
    assert results[0].refused == [dead.id] and results[0].changed == []
    assert row(dead.id).status == Status.FAILED


def test_another_tenants_item_is_never_touched(ctx: OpContext, worker_rctx, make_ctx) -> None:
    theirs = _dead(make_ctx(), worker_rctx)
    drawn = dead_letters.Drawn.of(theirs)
    assert dead_letters.requeue_dead(ctx, [drawn]).refused == [theirs.id]
    assert dead_letters.discard(ctx, [drawn]).refused == [theirs.id]
    with pytest.raises(api.Conflict, match="not in this tenant"):
        dead_letters.requeue_edited(ctx, drawn, {"n": 2})
    assert row(theirs.id).status == Status.FAILED
    assert _audit(theirs.id) == []


def test_discard_keeps_payload_and_error_in_the_audit_entry(ctx: OpContext, worker_rctx) -> None:
    dead = _dead(ctx, worker_rctx, payload={"n": 7}, error="poison")
    waiting, _ = api.enqueue(ctx, "NOOP", {"n": 8})
    result = dead_letters.discard(
        ctx, [dead_letters.Drawn.of(dead), dead_letters.Drawn.of(waiting)]
    )
    assert sorted(i.id for i in result.changed) == sorted([dead.id, waiting.id])
    assert {row(dead.id).status, row(waiting.id).status} == {Status.DISCARDED}
    [entry] = _audit(dead.id)
    assert entry.action == "work.discarded"
    assert entry.data == {
        "kind": "NOOP",
        "status": "failed",
        "attempts": 1,
        "error": "poison",
        "payload": {"n": 7},
    }
    assert _audit(waiting.id)[0].data["status"] == "pending"
    # Never claimed again.
    assert claim(worker_rctx, "default", ["NOOP"], "w2", 30, 10) == []


def test_edit_then_requeue_validates_against_the_kind(ctx: OpContext, worker_rctx) -> None:
    dead = _dead(ctx, worker_rctx, payload={"n": 1})
    drawn = dead_letters.Drawn.of(dead)
    for bad, says in (
        ({"n": "three"}, "payload.n"),
        ({"nope": 1}, "payload.nope"),
        ({"sleep_s": float("nan")}, "payload.sleep_s"),
        (["n"], "payload: must be a JSON object"),
    ):
        with pytest.raises(api.InvalidPayload, match=says):
            dead_letters.requeue_edited(ctx, drawn, bad)
    assert row(dead.id).payload == {"n": 1} and _audit(dead.id) == []
    item = dead_letters.requeue_edited(ctx, drawn, {"n": 2})
    assert (item.status, item.payload, item.attempts) == (Status.PENDING, {"n": 2}, 0)
    [entry] = _audit(dead.id)
    assert entry.action == "work.requeued_edited"
    assert (entry.data["payload_before"], entry.data["payload"]) == ({"n": 1}, {"n": 2})
    assert entry.data["error"] == "boom"


@pytest.mark.parametrize(
    ("status", "action"),
    [
        (Status.CLAIMED, "requeue"),
        (Status.PENDING, "requeue"),
        (Status.DONE, "requeue"),
        (Status.CLAIMED, "discard"),
        (Status.DONE, "discard"),
    ],
)
def test_an_action_refuses_a_status_it_does_not_act_on(
    ctx: OpContext, worker_rctx, status: str, action: str
) -> None:
    item, _ = api.enqueue(ctx, "NOOP", {})
    drawn = dead_letters.Drawn(item.id, status, item.updated_at)
    call = dead_letters.requeue_dead if action == "requeue" else dead_letters.discard
    with pytest.raises(api.InvalidPayload, match=f"{action} acts on"):
        call(ctx, [drawn])
    assert row(item.id).status == Status.PENDING


def test_batches_are_bounded_and_inputs_checked(ctx: OpContext, worker_rctx) -> None:
    dead = _dead(ctx, worker_rctx)
    many = [
        dead_letters.Drawn(WorkItem._meta.pk.default(), "failed", dead.updated_at)
        for _ in range(101)
    ]
    with pytest.raises(api.InvalidPayload, match="at most 100"):
        dead_letters.requeue_dead(ctx, many)
    with pytest.raises(api.InvalidPayload, match="at least one"):
        dead_letters.discard(ctx, [])
    for delay in (-1, float("nan"), float("inf"), 31 * 86400, True, "10"):
        with pytest.raises(api.InvalidPayload, match="delay"):
            dead_letters.requeue_dead(ctx, [dead_letters.Drawn.of(dead)], delay_s=delay)  # type: ignore[arg-type]
    assert row(dead.id).status == Status.FAILED


@pytest.mark.parametrize(
    ("token", "says"),
    [
        ("", "fence: must be"),
        ("a|b", "fence: must be"),
        ("x" * 300, "fence: must be"),
        (None, "fence: must be"),
        ("not-a-uuid|failed|2026-01-01T00:00:00+00:00", "fence.id"),
        ("00000000-0000-0000-0000-000000000001|evil|2026-01-01T00:00:00+00:00", "fence.status"),
        ("00000000-0000-0000-0000-000000000001|failed|yesterday", "fence.updated_at"),
        ("00000000-0000-0000-0000-000000000001|failed|2026-01-01T00:00:00", "fence.updated_at"),
        ("00000000-0000-0000-0000-000000000001|failed|2026-13-45T00:00:00+00:00", "fence.upd"),
    ],
)
def test_a_malformed_fence_is_refused_naming_the_field(token, says: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(api.InvalidPayload, match=says):
        dead_letters.Drawn.parse(token)


def test_a_fence_survives_its_round_trip_through_a_form(ctx: OpContext, worker_rctx) -> None:
    dead = _dead(ctx, worker_rctx)
    drawn = dead_letters.Drawn.of(dead)
    assert dead_letters.Drawn.parse(drawn.token()) == drawn
    assert dead_letters.requeue_dead(ctx, [dead_letters.Drawn.parse(drawn.token())]).refused == []


def test_a_rolled_back_transaction_takes_the_requeue_and_its_audit_back(
    ctx: OpContext, worker_rctx
) -> None:
    dead = _dead(ctx, worker_rctx)
    with pytest.raises(RuntimeError), transaction.atomic():
        dead_letters.requeue_dead(ctx, [dead_letters.Drawn.of(dead)])
        raise RuntimeError("the view failed")
    assert row(dead.id).status == Status.FAILED and _audit(dead.id) == []


def test_the_async_face_runs_the_same_statements(ctx: OpContext, worker_rctx) -> None:
    first, second, third = (_dead(ctx, worker_rctx) for _ in range(3))

    async def triage() -> tuple[dead_letters.Triaged, dead_letters.Triaged, WorkItem]:
        try:
            requeued = await dead_letters.requeue_dead.aio(ctx, [dead_letters.Drawn.of(first)])
            discarded = await dead_letters.discard.aio(ctx, [dead_letters.Drawn.of(second)])
            edited = await dead_letters.requeue_edited.aio(
                ctx, dead_letters.Drawn.of(third), {"n": 5}
            )
            return requeued, discarded, edited
        finally:
            await aclose_async_store()

    requeued, discarded, edited = asyncio.run(triage())
    assert [i.id for i in requeued.changed] == [first.id]
    assert [i.id for i in discarded.changed] == [second.id]
    assert edited.payload == {"n": 5}
    assert [row(i.id).status for i in (first, second, third)] == [
        Status.PENDING,
        Status.DISCARDED,
        Status.PENDING,
    ]


def test_discarded_items_are_purged_like_finished_ones(ctx: OpContext, worker_rctx) -> None:
    from datetime import UTC, datetime

    old, new = _dead(ctx, worker_rctx), _dead(ctx, worker_rctx)
    dead_letters.discard(ctx, [dead_letters.Drawn.of(old), dead_letters.Drawn.of(new)])
    back_date(old.id, updated_at=3600)
    before = datetime.now(UTC) - timedelta(minutes=30)
    assert runtime.purge_items(worker_rctx, before, statuses=(Status.DISCARDED,)) == 1
    assert list(WorkItem.objects.using("admin").values_list("id", flat=True)) == [new.id]
