"""enqueue: never overwrites, reports what it met, validates before it stores, announces."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction

from tenancy.contexts import SYSTEM_ACTOR, OpContext
from tenancy.scope import tenant_scope
from tests.helpers import row, statements
from workqueue.api import Kind, NewItem, Outcome, Payload, enqueue, enqueue_many, register
from workqueue.enqueue_many import BATCH_CHUNK
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.models import Status, WorkItem

SHIPMENT = {"shipment_id": str(uuid.uuid4()), "version": 1}


class AnyJson(Payload):
    data: Any = None


register(Kind("TEST_ANY_JSON", AnyJson))


def test_enqueue_stamps_what_the_queue_owns(face, ctx: OpContext) -> None:
    item, outcome = face.enqueue(ctx, "NOTIFY_SHIPMENT", SHIPMENT, priority=3)
    assert outcome == Outcome.INSERTED
    stored = row(item.id)
    assert (stored.org_id, stored.status, stored.attempts, stored.max_attempts) == (
        ctx.org_id,
        Status.PENDING,
        0,
        5,
    )
    assert (stored.claimed_by, stored.claim_token, stored.lease_expires_at) == (None, None, None)
    assert (stored.created_by, stored.updated_by) == (ctx.user_id, ctx.user_id)
    assert stored.request_id == ctx.request_id and stored.lane == "default"
    assert stored.payload == {**SHIPMENT, "channel": "email"}
    assert stored.available_at == stored.created_at  # now(), by the database's clock


def test_a_retried_enqueue_returns_the_row_untouched(face, ctx: OpContext, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {}, idempotency_key="order-1")
    [(_, held)] = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 1)
    again, outcome = face.enqueue(ctx, "NOOP", {"n": 2}, id=item.id, idempotency_key="order-1")
    assert outcome == Outcome.ID_EXISTS
    assert again.id == item.id and again.claim_token == held.claim_token
    assert row(item.id).status == Status.CLAIMED and row(item.id).payload == {}


def test_a_held_key_under_another_id_returns_that_row(face, ctx: OpContext) -> None:
    first, _ = face.enqueue(ctx, "NOOP", {"n": 1}, idempotency_key="k")
    other, outcome = face.enqueue(ctx, "NOOP", {"n": 2}, idempotency_key="k")
    assert outcome == Outcome.KEY_EXISTS
    assert other.id == first.id and other.payload["n"] == 1
    assert WorkItem.objects.using("admin").count() == 1


def test_the_same_key_in_another_tenant_is_inserted(face, ctx: OpContext, make_ctx) -> None:
    face.enqueue(ctx, "NOOP", {}, idempotency_key="k")
    _, outcome = face.enqueue(make_ctx(), "NOOP", {}, idempotency_key="k")
    assert outcome == Outcome.INSERTED
    assert WorkItem.objects.using("admin").count() == 2


def test_an_id_held_by_another_tenant_is_a_conflict_and_shows_nothing(face, ctx, make_ctx) -> None:
    theirs, _ = face.enqueue(make_ctx(), "NOOP", {"n": 1})
    with pytest.raises(Conflict):
        face.enqueue(ctx, "NOOP", {"n": 2}, id=theirs.id)
    assert row(theirs.id).org_id != ctx.org_id and row(theirs.id).payload["n"] == 1


@pytest.mark.parametrize(
    ("kind", "payload", "says"),
    [
        ("NOPE", {}, "kind: unknown work kind 'NOPE'"),
        ("NOTIFY_SHIPMENT", {"version": 1}, "payload.shipment_id: Field required"),
        ("NOTIFY_SHIPMENT", {**SHIPMENT, "version": 0}, "payload.version: Input should be greater"),
        ("NOTIFY_SHIPMENT", {**SHIPMENT, "colour": "red"}, "payload.colour: Extra inputs"),
        ("NOOP", {"n": {1, 2}}, "payload.n: Input should be a valid integer"),
        ("NOOP", {"sent_at": float("nan")}, "payload.sent_at: Input should be a finite number"),
        ("TEST_ANY_JSON", {"data": {"x": object()}}, "payload: not JSON-serialisable"),
        ("NOOP", ["not", "an", "object"], "payload: must be a JSON object"),
    ],
)
def test_invalid_input_stores_nothing(face, ctx: OpContext, kind: str, payload, says: str) -> None:
    with pytest.raises(InvalidPayload, match=says.replace("(", r"\(")):
        face.enqueue(ctx, kind, payload)
    assert WorkItem.objects.using("admin").count() == 0


def test_every_error_of_a_payload_is_listed(face, ctx: OpContext) -> None:
    with pytest.raises(InvalidPayload) as refused:
        face.enqueue(ctx, "NOTIFY_SHIPMENT", {"version": 0, "colour": "red"})
    said = str(refused.value)
    assert "more)" not in said
    for expected in (
        "payload.shipment_id: Field required",
        "payload.version: Input should be greater",
        "payload.colour: Extra inputs",
    ):
        assert expected in said, said
    assert WorkItem.objects.using("admin").count() == 0


def test_one_invalid_item_refuses_the_whole_batch(face, ctx: OpContext) -> None:
    batch = [NewItem("NOOP", {"n": 1}), NewItem("NOTIFY_SHIPMENT", {"version": 1})]
    with pytest.raises(InvalidPayload, match=r"items\[1\]\.payload\.shipment_id"):
        face.enqueue_many(ctx, batch)
    assert WorkItem.objects.using("admin").count() == 0


def test_a_large_fresh_batch_is_inserted_in_chunks_in_order(face, ctx: OpContext) -> None:
    """Over BATCH_CHUNK fresh items: chunks of one transaction, each sent before the next is
    validated; every item stored, ids in input order, one announcement per chunk at most."""
    n = BATCH_CHUNK * 2 + 7
    results = face.enqueue_many(ctx, [NewItem("NOOP", {"n": i}) for i in range(n)])
    assert [outcome for _, outcome in results] == [Outcome.INSERTED] * n
    stored = WorkItem.objects.using("admin").in_bulk([item_id for item_id, _ in results])
    assert [stored[item_id].payload["n"] for item_id, _ in results] == list(range(n))
    assert {item.org_id for item in stored.values()} == {ctx.org_id}


def test_a_large_batch_with_an_invalid_item_late_stores_nothing(face, ctx: OpContext) -> None:
    """The invalid item is met after earlier chunks were sent: their inserts roll back."""
    n = BATCH_CHUNK * 2 + 7
    batch = [NewItem("NOOP", {"n": i}) for i in range(n)]
    batch[n - 3] = NewItem("NOTIFY_SHIPMENT", {"version": 1})
    with pytest.raises(InvalidPayload, match=rf"items\[{n - 3}\]\.payload\.shipment_id"):
        face.enqueue_many(ctx, batch)
    assert WorkItem.objects.using("admin").count() == 0


def test_a_large_batch_refused_inside_a_transaction_leaves_it_usable(ctx: OpContext) -> None:
    batch = [NewItem("NOOP", {"n": i}) for i in range(BATCH_CHUNK + 1)]
    batch[-1] = NewItem("NOOP", ["not", "an", "object"])  # type: ignore[arg-type]
    with tenant_scope(ctx.org_id):
        kept, _ = enqueue(ctx, "NOOP", {"n": -1})
        with pytest.raises(InvalidPayload, match=rf"items\[{BATCH_CHUNK}\]\.payload"):
            enqueue_many(ctx, batch)
        after, _ = enqueue(ctx, "NOOP", {"n": -2})  # the transaction goes on
    stored = WorkItem.objects.using("admin")
    assert {item.id for item in stored.all()} == {kept.id, after.id}


def test_enqueue_many_inserts_in_one_statement_and_reports_collisions(ctx: OpContext) -> None:
    existing, _ = enqueue(ctx, "NOOP", {"n": 0}, idempotency_key="dup")
    batch = [NewItem("NOOP", {"n": i}) for i in range(50)]
    batch += [
        NewItem("NOOP", {"n": 99}, idempotency_key="dup"),
        NewItem("NOOP", {}, id=existing.id),
    ]
    with statements("default", "system") as sent:
        results = enqueue_many(ctx, batch)
    outcomes = [outcome for _, outcome in results]
    assert outcomes == [Outcome.INSERTED] * 50 + [Outcome.KEY_EXISTS, Outcome.ID_EXISTS]
    assert results[50][0] == existing.id and results[51][0] == existing.id
    stored = WorkItem.objects.using("admin").in_bulk([item_id for item_id, _ in results[:50]])
    assert [stored[item_id].payload["n"] for item_id, _ in results[:50]] == list(range(50))
    assert WorkItem.objects.using("admin").count() == 51
    # one insert for the whole batch, one read-back for the two collisions
    assert sum("INSERT INTO workqueue_workitem" in sql for sql in sent) == 1
    assert sum("read_items" in sql for sql in sent) == 1


def test_enqueue_is_one_round_trip(ctx: OpContext) -> None:
    with statements("default", "system") as sent:
        enqueue(ctx, "NOOP", {})
    assert len(sent) == 1


def test_enqueue_announces_work_on_commit(ctx: OpContext) -> None:
    settings = connections["admin"].get_connection_params()
    with psycopg.connect(**settings, autocommit=True) as listener:
        listener.execute("LISTEN work_available")
        with transaction.atomic():
            enqueue(ctx, "NOOP", {}, lane="bulk")
            assert list(listener.notifies(timeout=0.2, stop_after=1)) == []
        [notice] = list(listener.notifies(timeout=5, stop_after=1))
    assert (notice.channel, notice.payload) == ("work_available", "bulk")


def test_an_enqueue_that_inserts_nothing_announces_nothing(ctx: OpContext) -> None:
    """The announcement is made by the insert's own returned row: a taken key returns none."""
    first, _ = enqueue(ctx, "NOOP", {}, idempotency_key="once", lane="bulk")
    settings = connections["admin"].get_connection_params()
    with psycopg.connect(**settings, autocommit=True) as listener:
        listener.execute("LISTEN work_available")
        again, outcome = enqueue(ctx, "NOOP", {}, idempotency_key="once", lane="bulk")
        assert (again.id, outcome) == (first.id, Outcome.KEY_EXISTS)
        assert list(listener.notifies(timeout=0.3, stop_after=1)) == []


def test_a_large_fresh_batch_announces_its_lane_once_at_commit(face, ctx: OpContext) -> None:
    """Each chunk announces its lane; the server delivers one notice per lane at commit."""
    settings = connections["admin"].get_connection_params()
    with psycopg.connect(**settings, autocommit=True) as listener:
        listener.execute("LISTEN work_available")
        face.enqueue_many(ctx, [NewItem("NOOP", {"n": i}, lane="bulk") for i in range(700)])
        notices = list(listener.notifies(timeout=0.5, stop_after=2))
    assert [(n.channel, n.payload) for n in notices] == [("work_available", "bulk")]


def test_enqueue_inside_a_transaction_rolls_back_with_it(ctx: OpContext) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue(ctx, "NOOP", {})
        raise RuntimeError("the domain write failed")
    assert WorkItem.objects.using("admin").count() == 0


def test_a_service_context_enqueues_as_the_system_user(face, ctx: OpContext) -> None:
    from tenancy.services import service_context

    item, _ = face.enqueue(service_context(ctx.rctx, ctx.org_id), "NOOP", {})
    assert row(item.id).created_by == SYSTEM_ACTOR


def test_the_author_is_the_contexts_user_whatever_the_caller_sends(face, ctx, make_ctx) -> None:
    """Issue 8.6: no caller names another author (work would run with that user's rights)."""
    other = make_ctx()
    with pytest.raises(TypeError):
        face.enqueue(ctx, "NOOP", {}, created_by=other.user_id)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        NewItem("NOOP", {}, created_by=other.user_id)  # type: ignore[call-arg]
    [(item_id, _)] = face.enqueue_many(ctx, [NewItem("NOOP", {})])
    assert WorkItem.objects.using("admin").count() == 1
    assert (row(item_id).created_by, row(item_id).updated_by) == (ctx.user_id, ctx.user_id)


def test_enqueue_inside_another_scope_leaves_that_scopes_tenant(ctx: OpContext, make_ctx) -> None:
    from tenancy.scope import tenant_scope

    other = make_ctx()
    with tenant_scope(other.org_id), connections["default"].cursor() as cursor:
        item, _ = enqueue(ctx, "NOOP", {})
        cursor.execute("SELECT current_setting('app.org_id', true)")
        assert cursor.fetchone()[0] == str(other.org_id)
    assert row(item.id).org_id == ctx.org_id


def test_enqueue_many_keeps_every_field_it_is_given(face, ctx: OpContext) -> None:
    from datetime import UTC, datetime, timedelta

    later = datetime.now(UTC) + timedelta(hours=1)
    key = 'order "42" \u2013 ünïcode\\n'
    [(item_id, outcome)] = face.enqueue_many(
        ctx,
        [
            NewItem(
                "NOOP", {"n": 7}, idempotency_key=key, lane="bulk", priority=-3, available_at=later
            )
        ],
    )
    stored = row(item_id)
    assert outcome == Outcome.INSERTED
    assert (stored.idempotency_key, stored.lane, stored.priority) == (key, "bulk", -3)
    assert stored.available_at == later and stored.payload == {"n": 7}
    assert item_id.version == 7  # time-ordered ids
