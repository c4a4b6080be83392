"""The shipment notifier on claimed items: one notice per version, a compare-and-set advance."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connections

from tenancy.contexts import OpContext
from tenancy.rls import tables_missing_policy, tenant_tables
from tenancy.scope import tenant_scope
from workers.demo.handler import NotifyShipmentHandler
from workers.demo.models import Shipment, ShipmentNotice, ShipmentStatus
from workqueue.api import PermanentError, RetryableError, Run, enqueue
from workqueue.claim import claim
from workqueue.models import WorkItem
from workqueue.runtime import handler_for

TABLES = ("workqueue_demo_shipment", "workqueue_demo_shipmentnotice")


def make_shipment(org_id: uuid.UUID, **fields: Any) -> Shipment:
    """A shipment written as the owner, at version 1 unless told otherwise."""
    fields.setdefault("reference", f"SHP-{uuid.uuid4().hex[:8]}")
    fields.setdefault("recipient_email", "recipient@example.com")
    return Shipment.objects.using("admin").create(org_id=org_id, **fields)


def stored(shipment: Shipment) -> Shipment:
    """The shipment as stored, read as the owner (no tenant)."""
    return Shipment.objects.using("admin").get(pk=shipment.pk)


def notices(shipment: Shipment) -> list[tuple[int, str]]:
    """The notices sent about the shipment, as (version, channel), read as the owner."""
    return list(
        ShipmentNotice.objects.using("admin")
        .filter(shipment_id=shipment.pk)
        .order_by("version", "channel")
        .values_list("version", "channel")
    )


def claimed(
    ctx: OpContext, worker_rctx, payloads: list[dict[str, Any]]
) -> list[tuple[OpContext, WorkItem]]:
    for payload in payloads:
        enqueue(ctx, "NOTIFY_SHIPMENT", payload)
    held = claim(worker_rctx, "default", ["NOTIFY_SHIPMENT"], "w1", 30, len(payloads))
    assert len(held) == len(payloads)
    return held


def claimed_one(ctx: OpContext, worker_rctx, **payload: Any) -> tuple[OpContext, WorkItem]:
    payload = {**payload, "shipment_id": str(payload["shipment_id"])}
    [held] = claimed(ctx, worker_rctx, [payload])
    return held


@contextmanager
def before_statement(starts_with: str, action: Callable[[], None]) -> Iterator[list[str]]:
    """Run ``action`` (on another connection) once, just before the handler's first statement
    on ``default`` that starts with ``starts_with``: a concurrent writer, without mocks."""
    fired: list[str] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if not fired and sql.startswith(starts_with):
            fired.append(sql)
            action()
        return execute(sql, params, many, context)

    with connections["default"].execute_wrapper(wrapper):
        yield fired


def as_owner(sql: str, params: list[Any]) -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute(sql, params)


def test_the_handler_runs_notify_shipment() -> None:
    assert isinstance(handler_for("NOTIFY_SHIPMENT"), NotifyShipmentHandler)


def test_a_notice_goes_out_and_the_shipment_advances(ctx: OpContext, worker_rctx) -> None:
    shipment = make_shipment(ctx.org_id)
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=1)
    run = Run()

    NotifyShipmentHandler().handle(item_ctx, item, run)

    assert run.side_effect
    assert notices(shipment) == [(1, "email")]
    notice = ShipmentNotice.objects.using("admin").get(shipment_id=shipment.pk)
    assert notice.org_id == ctx.org_id and notice.sent_at is not None
    now = stored(shipment)
    assert (now.notified_version, now.version) == (1, 2)
    assert now.updated_at > shipment.updated_at


def test_running_the_same_item_twice_sends_one_notice(ctx: OpContext, worker_rctx) -> None:
    shipment = make_shipment(ctx.org_id)
    item_ctx, item = claimed_one(
        ctx, worker_rctx, shipment_id=shipment.pk, version=1, channel="sms"
    )
    NotifyShipmentHandler().handle(item_ctx, item, Run())
    again = Run()

    NotifyShipmentHandler().handle(item_ctx, item, again)

    assert not again.side_effect
    assert notices(shipment) == [(1, "sms")]
    now = stored(shipment)
    assert (now.notified_version, now.version) == (1, 2)


def test_two_items_for_the_same_version_send_one_notice(ctx: OpContext, worker_rctx) -> None:
    shipment = make_shipment(ctx.org_id)
    payload = {"shipment_id": str(shipment.pk), "version": 1}
    (first_ctx, first), (second_ctx, second) = claimed(ctx, worker_rctx, [payload, payload])
    assert first.id != second.id

    NotifyShipmentHandler().handle(first_ctx, first, Run())
    NotifyShipmentHandler().handle(second_ctx, second, Run())

    assert notices(shipment) == [(1, "email")]
    assert stored(shipment).version == 2


def test_a_later_version_is_notified_after_an_earlier_one(ctx: OpContext, worker_rctx) -> None:
    shipment = make_shipment(ctx.org_id)
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=1)
    NotifyShipmentHandler().handle(item_ctx, item, Run())
    # The shipment moves on (version 2 -> 3); its change announces version 3.
    Shipment.objects.using("admin").filter(pk=shipment.pk).update(
        status=ShipmentStatus.DELIVERED, version=3
    )
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=3)

    NotifyShipmentHandler().handle(item_ctx, item, Run())

    assert notices(shipment) == [(1, "email"), (3, "email")]
    now = stored(shipment)
    assert (now.notified_version, now.version) == (3, 4)


def test_a_change_between_read_and_write_fails_the_compare_and_set(
    ctx: OpContext, worker_rctx
) -> None:
    shipment = make_shipment(ctx.org_id)
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=1)
    run = Run()

    def someone_else_changes_it() -> None:
        as_owner(
            "UPDATE workqueue_demo_shipment SET status = %s, version = version + 1 WHERE id = %s",
            [ShipmentStatus.IN_TRANSIT, shipment.pk],
        )

    with before_statement('UPDATE "workqueue_demo_shipment"', someone_else_changes_it) as fired:
        with pytest.raises(RetryableError, match="changed after version 1"):
            NotifyShipmentHandler().handle(item_ctx, item, run)

    assert fired, "the concurrent change never ran"
    # The notice was sent (marked), so the worker dead-letters instead of retrying...
    assert run.side_effect
    # ...and nothing of the failed attempt is left: the notice went with the transaction,
    # and the other writer's change stands.
    assert notices(shipment) == []
    now = stored(shipment)
    assert (now.notified_version, now.version, now.status) == (0, 2, ShipmentStatus.IN_TRANSIT)
    assert not connections["default"].in_atomic_block


def test_a_missing_shipment_is_a_permanent_error(ctx: OpContext, worker_rctx) -> None:
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=uuid.uuid4(), version=1)
    run = Run()

    with pytest.raises(PermanentError, match="not found"):
        NotifyShipmentHandler().handle(item_ctx, item, run)

    assert not run.side_effect
    assert ShipmentNotice.objects.using("admin").count() == 0


def test_another_tenants_shipment_is_missing(ctx: OpContext, make_ctx, worker_rctx) -> None:
    theirs = make_shipment(make_ctx().org_id)
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=theirs.pk, version=1)

    with pytest.raises(PermanentError, match="not found"):
        NotifyShipmentHandler().handle(item_ctx, item, Run())

    assert notices(theirs) == []
    assert (stored(theirs).notified_version, stored(theirs).version) == (0, 1)


def test_a_version_ahead_of_the_shipment_is_retried_and_sends_nothing(
    ctx: OpContext, worker_rctx
) -> None:
    shipment = make_shipment(ctx.org_id)
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=2)
    run = Run()

    with pytest.raises(RetryableError, match="behind the notice's version 2"):
        NotifyShipmentHandler().handle(item_ctx, item, run)

    assert not run.side_effect
    assert notices(shipment) == []
    assert (stored(shipment).notified_version, stored(shipment).version) == (0, 1)


def test_a_cancelled_run_sends_nothing(ctx: OpContext, worker_rctx) -> None:
    shipment = make_shipment(ctx.org_id)
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=1)
    run = Run()
    run.cancel()

    with pytest.raises(RetryableError, match="cancelled"):
        NotifyShipmentHandler().handle(item_ctx, item, run)

    assert not run.side_effect
    assert notices(shipment) == []
    assert stored(shipment).version == 1


def test_a_notice_a_concurrent_run_committed_counts_as_done(ctx: OpContext, worker_rctx) -> None:
    shipment = make_shipment(ctx.org_id)
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=1)
    run = Run()

    def another_run_sends_and_advances() -> None:
        as_owner(
            "INSERT INTO workqueue_demo_shipmentnotice"
            " (id, org_id, shipment_id, version, channel) VALUES (%s, %s, %s, 1, 'email')",
            [uuid.uuid4(), ctx.org_id, shipment.pk],
        )
        as_owner(
            "UPDATE workqueue_demo_shipment SET notified_version = 1, version = 2 WHERE id = %s",
            [shipment.pk],
        )

    with before_statement(
        'INSERT INTO "workqueue_demo_shipmentnotice"', another_run_sends_and_advances
    ) as fired:
        NotifyShipmentHandler().handle(item_ctx, item, run)

    assert fired, "the concurrent run never ran"
    assert not run.side_effect
    assert notices(shipment) == [(1, "email")]
    assert (stored(shipment).notified_version, stored(shipment).version) == (1, 2)


def test_a_notice_the_shipment_does_not_record_is_a_permanent_error(
    ctx: OpContext, worker_rctx
) -> None:
    shipment = make_shipment(ctx.org_id)
    ShipmentNotice.objects.using("admin").create(
        org_id=ctx.org_id, shipment=shipment, version=1, channel="email"
    )
    item_ctx, item = claimed_one(ctx, worker_rctx, shipment_id=shipment.pk, version=1)
    run = Run()

    with pytest.raises(PermanentError, match="does not record it"):
        NotifyShipmentHandler().handle(item_ctx, item, run)

    assert not run.side_effect
    assert notices(shipment) == [(1, "email")]
    assert stored(shipment).version == 1


@pytest.mark.usefixtures("committed")
def test_the_shipment_tables_carry_the_tenant_policy() -> None:
    assert set(TABLES) <= set(tenant_tables())
    assert tables_missing_policy(connections["admin"], list(TABLES)) == {}


def test_the_everyday_login_sees_only_its_tenants_shipments(ctx: OpContext, make_ctx) -> None:
    mine = make_shipment(ctx.org_id)
    make_shipment(make_ctx().org_id)
    assert Shipment.objects.count() == 0
    with tenant_scope(ctx.org_id):
        assert list(Shipment.objects.values_list("pk", flat=True)) == [mine.pk]
