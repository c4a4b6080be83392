"""``deferred_tenant_scope``: the tenant's transaction starts with the block's first statement.

It must fence exactly as ``tenant_scope`` does once anything is sent, and send nothing when
nothing is queried (what a task that only calls an HTTP API costs).
"""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connections, transaction
from psycopg.pq import TransactionStatus

from tenancy.contexts import OpContext
from tenancy.scope import current_tenant, deferred_tenant_scope, tenant_scope
from tests.contract.test_shipment_notifier import make_shipment
from workers.demo.models import Shipment
from workqueue import api

pytestmark = pytest.mark.usefixtures("committed")


def _status() -> TransactionStatus:
    connection = connections["default"]
    connection.ensure_connection()
    return connection.connection.info.transaction_status


def _tenant_now() -> str:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT current_setting('app.org_id', true)")
        return cursor.fetchone()[0] or ""


def test_a_block_that_queries_nothing_sends_nothing(ctx: OpContext) -> None:
    assert _status() == TransactionStatus.IDLE
    with deferred_tenant_scope(ctx.org_id):
        assert current_tenant(connections["default"]) == str(ctx.org_id)
        assert _status() == TransactionStatus.IDLE  # no BEGIN, no setting sent
    assert _status() == TransactionStatus.IDLE
    assert current_tenant(connections["default"]) is None


def test_the_first_statement_meets_the_tenant_and_only_its_rows(ctx: OpContext, make_ctx) -> None:
    other = make_ctx()
    mine, theirs = make_shipment(ctx.org_id), make_shipment(other.org_id)
    with deferred_tenant_scope(ctx.org_id):
        assert list(Shipment.objects.values_list("pk", flat=True)) == [mine.pk]
        assert _status() == TransactionStatus.INTRANS
        assert not Shipment.objects.filter(pk=theirs.pk).exists()
    assert _tenant_now() == ""
    assert Shipment.objects.count() == 0  # nothing outlives the block


def test_a_rolled_back_savepoint_keeps_the_tenant(ctx: OpContext) -> None:
    shipment = make_shipment(ctx.org_id, reference="SHP-1")
    with deferred_tenant_scope(ctx.org_id):
        with pytest.raises(IntegrityError), transaction.atomic():
            Shipment.objects.create(
                org_id=ctx.org_id, reference="SHP-1", recipient_email="r@example.com"
            )
        assert Shipment.objects.get().pk == shipment.pk


def test_a_block_that_raises_writes_nothing(ctx: OpContext) -> None:
    with pytest.raises(RuntimeError), deferred_tenant_scope(ctx.org_id):
        api.enqueue(ctx, "NOOP", {})
        Shipment.objects.create(org_id=ctx.org_id, reference="r", recipient_email="r@example.com")
        raise RuntimeError("the task failed")
    assert Shipment.objects.using("admin").count() == 0
    from workqueue.models import WorkItem

    assert WorkItem.objects.using("admin").count() == 0


def test_nested_scopes_put_the_tenant_back(ctx: OpContext, make_ctx) -> None:
    other = make_ctx()
    make_shipment(ctx.org_id)
    make_shipment(other.org_id)
    with deferred_tenant_scope(ctx.org_id):
        with tenant_scope(other.org_id):
            assert Shipment.objects.get().org_id == other.org_id
        assert Shipment.objects.get().org_id == ctx.org_id


def test_inside_a_transaction_it_names_the_tenant_at_once(ctx: OpContext) -> None:
    make_shipment(ctx.org_id)
    with transaction.atomic():
        with deferred_tenant_scope(ctx.org_id):
            assert _tenant_now() == str(ctx.org_id)
        assert _tenant_now() == ""
