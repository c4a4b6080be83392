"""The outbox: rows written with the domain change, relayed into work and notifications."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from django.db import connections, transaction

from outbox.emit import emit
from outbox.models import OutboxRow, OutboxStatus
from outbox.relay import purge_relayed, read_lag, relay_all, relay_pending
from tenancy.contexts import OpContext
from tests.helpers import back_date_outbox
from workers.demo.models import Shipment
from workqueue.api import InvalidPayload, Status
from workqueue.models import WorkItem

pytestmark = pytest.mark.usefixtures("committed")

NOTICE = {"shipment_id": str(uuid.uuid4()), "version": 1}


def _rows() -> list[OutboxRow]:
    return list(OutboxRow.objects.using("admin").order_by("created_at"))


def test_a_work_row_relayed_twice_leaves_one_item_carrying_the_rows_stamps(
    ctx: OpContext, worker_rctx
) -> None:
    row_id = emit(ctx, "work.NOTIFY_SHIPMENT", {**NOTICE, "lane": "mail"})
    assert relay_pending(worker_rctx).enqueued == 1
    # Relaying the same row again (a crash before it was marked) meets its own item.
    OutboxRow.objects.using("admin").filter(pk=row_id).update(status=OutboxStatus.PENDING)
    assert relay_pending(worker_rctx).enqueued == 1
    [item] = WorkItem.objects.using("admin").all()
    assert item.id == row_id and item.idempotency_key == str(row_id)
    assert (item.org_id, item.created_by, item.request_id) == (
        ctx.org_id,
        ctx.user_id,
        ctx.request_id,
    )
    assert item.lane == "mail" and "lane" not in item.payload
    assert item.payload["shipment_id"] == NOTICE["shipment_id"]
    assert _rows()[0].status == OutboxStatus.RELAYED


def test_the_rows_traceparent_carries_over(ctx: OpContext, worker_rctx) -> None:
    from dataclasses import replace

    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced = replace(ctx, rctx=replace(ctx.rctx, traceparent=traceparent))
    emit(traced, "work.NOOP", {})
    relay_pending(worker_rctx)
    assert WorkItem.objects.using("admin").get().traceparent == traceparent


def test_a_rollback_after_emit_leaves_no_row_and_no_domain_write(ctx: OpContext) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        from tenancy.scope import tenant_scope

        with tenant_scope(ctx.org_id):
            Shipment.objects.create(org_id=ctx.org_id, reference="s1", recipient_email="a@b.io")
            emit(ctx, "work.NOOP", {})
        raise RuntimeError("the view failed")
    assert _rows() == [] and Shipment.objects.using("admin").count() == 0


def test_emit_commits_with_the_domain_write_and_announces_it(ctx: OpContext) -> None:
    from tenancy.scope import tenant_scope

    params = connections["admin"].get_connection_params()
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute("LISTEN outbox_pending")
        with transaction.atomic(), tenant_scope(ctx.org_id):
            Shipment.objects.create(org_id=ctx.org_id, reference="s1", recipient_email="a@b.io")
            emit(ctx, "work.NOOP", {})
            assert list(listener.notifies(timeout=0.2, stop_after=1)) == []
        [notice] = list(listener.notifies(timeout=5, stop_after=1))
    assert notice.channel == "outbox_pending"
    assert len(_rows()) == 1 and Shipment.objects.using("admin").count() == 1


def test_another_kind_is_published_on_its_channel(ctx: OpContext, worker_rctx) -> None:
    params = connections["admin"].get_connection_params()
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute('LISTEN "shipment.booked"')
        row_id = emit(ctx, "shipment.booked", {"reference": "s1"})
        assert relay_pending(worker_rctx).published == 1
        [notice] = list(listener.notifies(timeout=5, stop_after=1))
    assert notice.channel == "shipment.booked"
    assert json.loads(notice.payload) == {
        "id": str(row_id),
        "org_id": str(ctx.org_id),
        "payload": {"reference": "s1"},
    }
    assert WorkItem.objects.using("admin").count() == 0


@pytest.mark.parametrize(
    ("kind", "payload", "says"),
    [
        ("work.NOPE", {}, "kind: unknown work kind 'NOPE'"),
        ("work.NOTIFY_SHIPMENT", {"version": 1}, "payload.shipment_id: Field required"),
        ("work.NOOP", {"lane": 'a","x'}, "lane: must be 1 to 50"),
        ("work.NOOP", ["x"], "payload: must be a JSON object"),
        ("bad channel!", {}, "kind: must be 1 to 63"),
        ("note", {"x": float("nan")}, "payload.x: NaN and infinity"),
        ("note", {"x": "a\x00b"}, "payload.x: must not contain a NUL"),
        ("note", {"x": "y" * 8000}, "a notification travels in one NOTIFY"),
    ],
)
def test_bad_input_is_refused_at_emit_and_stores_nothing(ctx, kind, payload, says) -> None:
    with transaction.atomic():
        with pytest.raises(InvalidPayload, match=says.replace("(", r"\(")):
            emit(ctx, kind, payload)
        emit(ctx, "work.NOOP", {})  # the caller's transaction is still usable
    assert len(_rows()) == 1


def test_a_row_whose_kind_left_the_release_is_failed_not_retried(ctx, worker_rctx) -> None:
    row_id = emit(ctx, "work.NOOP", {})
    OutboxRow.objects.using("admin").filter(pk=row_id).update(kind="work.GONE_KIND")
    result = relay_pending(worker_rctx)
    assert (result.enqueued, result.failed) == (0, 1)
    row = _rows()[0]
    assert row.status == OutboxStatus.FAILED and "GONE_KIND" in row.last_error


def test_relay_all_is_bounded_and_relays_across_tenants(ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    for i in range(7):
        emit(ctx if i % 2 else other, "work.NOOP", {"n": i})
    assert relay_all(worker_rctx, batch=3, max_batches=2).enqueued == 6
    assert relay_all(worker_rctx, batch=3, max_batches=2).enqueued == 1
    assert WorkItem.objects.using("admin").filter(status=Status.PENDING).count() == 7
    assert {i.org_id for i in WorkItem.objects.using("admin").all()} == {ctx.org_id, other.org_id}


def test_purge_and_lag(ctx: OpContext, worker_rctx) -> None:
    old = emit(ctx, "work.NOOP", {"n": 1})
    relay_pending(worker_rctx)
    waiting = emit(ctx, "work.NOOP", {"n": 2})
    back_date_outbox(waiting, created_at=90)
    back_date_outbox(old, relayed_at=7200)
    lag = read_lag(worker_rctx)
    assert lag.pending == 1 and 89 < lag.oldest_s < 120
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now() - interval '1 hour'")
        (hour_ago,) = cursor.fetchone()
    assert purge_relayed(worker_rctx, hour_ago) == 1
    assert [r.id for r in _rows()] == [waiting]
