"""The queue's own calls on its distributed tables (``citus_distribute``), in ``set_local`` mode.

Tenants A and B are placed so that their shards sit on different workers. Each enqueues, reads
by id, reads its result and filters its items on its own node; B never sees a row of A's in any
tenant table; and a view's write to the site's own distributed table plus the enqueue commit as
one transaction on one worker, with no two-phase commit.
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from django.db import connections, transaction
from django.db.utils import ProgrammingError

from tests.citus.conftest import URL, Tenant, new_tenant, remote_commands, written_ports
from workqueue import api
from workqueue.citus import TENANT_TABLES
from workqueue.models import WorkItem
from wqcore.scope import tenant_scope

APP = "citus_app"


@pytest.fixture
def tenants(product: dict[str, str], coordinator: psycopg.Connection) -> tuple[Tenant, Tenant]:
    a = new_tenant(coordinator)
    return a, new_tenant(coordinator, avoid=a.port)


def _done(coordinator: psycopg.Connection, item_id: uuid.UUID, result: str) -> None:
    """Stand in for a worker's completion (the claim is not routed yet)."""
    coordinator.execute(
        "UPDATE workqueue_workitem SET status = 'done', result = %s::jsonb WHERE id = %s",
        [result, item_id],
    )


def test_each_tenant_enqueues_and_reads_on_its_own_node(
    tenants: tuple[Tenant, Tenant], coordinator: psycopg.Connection
) -> None:
    a, b = tenants
    assert a.port != b.port
    for t in (a, b):
        item, outcome = api.enqueue(t.ctx, "NOOP", {}, idempotency_key="k1")
        assert outcome == api.Outcome.INSERTED and item.org_id == t.org_id
        again, outcome = api.enqueue(t.ctx, "NOOP", {}, idempotency_key="k1")
        assert (outcome, again.id) == (api.Outcome.KEY_EXISTS, item.id)
        assert api.status_of(t.ctx, item.id).status == api.Status.PENDING
        assert api.result_of(t.ctx, item.id) is None
        _done(coordinator, item.id, '{"total": 3}')
        assert api.result_of(t.ctx, item.id) == {"total": 3}
        with tenant_scope(t.org_id, using=APP):
            mine = WorkItem.objects.using(APP).filter(kind="NOOP", idempotency_key="k1")
            assert [(i.id, i.org_id) for i in mine] == [(item.id, t.org_id)]
        row = coordinator.execute(
            "SELECT nodeport FROM citus_shards WHERE shardid ="
            " get_shard_id_for_distribution_column('workqueue_workitem', %s)",
            [t.org_id],
        ).fetchone()
        assert row == (t.port,)


def test_tenant_b_never_sees_a_row_of_tenant_a_on_another_node(
    tenants: tuple[Tenant, Tenant],
) -> None:
    a, b = tenants
    item, _ = api.enqueue(a.ctx, "NOOP", {})
    with pytest.raises(api.NotFound):
        api.status_of(b.ctx, item.id)
    with pytest.raises(api.NotFound):
        api.result_of(b.ctx, item.id)
    with tenant_scope(b.org_id, using=APP):
        assert not WorkItem.objects.using(APP).filter(id=item.id).exists()
        with connections[APP].cursor() as cursor:
            for table in TENANT_TABLES:
                cursor.execute(f"SELECT count(*) FROM {table} WHERE org_id <> %s", [b.org_id])
                assert cursor.fetchone() == (0,), table
        with connections[APP].cursor() as cursor:
            cursor.execute(
                "UPDATE workqueue_workitem SET last_error = 'x' WHERE id = %s", [item.id]
            )
            assert cursor.rowcount == 0
    with pytest.raises(ProgrammingError, match="row-level security"):
        with tenant_scope(b.org_id, using=APP), connections[APP].cursor() as cursor:
            cursor.execute(
                "INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority,"
                " available_at) VALUES (1, %s, %s, 'default', 'NOOP', 0, now())",
                [item.id, a.org_id],
            )
    assert api.status_of(a.ctx, item.id).status == api.Status.PENDING


def test_a_views_write_and_its_enqueue_commit_on_one_node_without_2pc(
    tenants: tuple[Tenant, Tenant], site_table: str, coordinator: psycopg.Connection
) -> None:
    a, _ = tenants
    prepared = coordinator.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
    seen = remote_commands(APP)
    with connections[APP].cursor() as cursor:
        cursor.execute("SET citus.log_remote_commands = on")
        cursor.execute("SET client_min_messages = log")
    try:
        with transaction.atomic(using=APP), tenant_scope(a.org_id, using=APP):
            with connections[APP].cursor() as cursor:
                cursor.execute(f"INSERT INTO {site_table} VALUES (%s, 1, 'order')", [a.org_id])
            item, outcome = api.enqueue(a.ctx, "NOOP", {}, idempotency_key="order-1")
    finally:
        with connections[APP].cursor() as cursor:
            cursor.execute("RESET client_min_messages")
            cursor.execute("RESET citus.log_remote_commands")
    assert outcome == api.Outcome.INSERTED
    remote = [line for line in seen if "issuing" in line]
    written = written_ports(remote)
    assert written == {a.port}, remote
    assert not [line for line in remote if "PREPARE TRANSACTION" in line], remote
    assert any("COMMIT" in line for line in remote), remote
    after = coordinator.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
    assert after == prepared
    with tenant_scope(a.org_id, using=APP):
        assert api.status_of(a.ctx, item.id).status == api.Status.PENDING


def test_the_enqueue_announces_its_lane_from_the_coordinator(
    tenants: tuple[Tenant, Tenant],
) -> None:
    """The notice is made by the coordinator's part of the statement (a NOTIFY on a worker
    never reaches a LISTEN on the coordinator)."""
    a, _ = tenants
    with psycopg.connect(URL, autocommit=True) as listener:
        listener.execute("LISTEN work_available")
        api.enqueue(a.ctx, "NOOP", {}, lane="citus-notice")
        heard = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
    assert heard == ["citus-notice"]


def test_the_async_enqueue_writes_the_item_and_its_ready_row(
    tenants: tuple[Tenant, Tenant], coordinator: psycopg.Connection
) -> None:
    """The async face's own connections, each step a transaction of its own on the tenant's
    node: the item and its ready row."""
    from wqcore.async_face import aclose_async_store

    a, b = tenants

    async def run() -> list[uuid.UUID]:
        try:
            return [
                (await api.aenqueue(t.ctx, "NOOP", {}, lane="citus-async"))[0].id for t in tenants
            ]
        finally:
            await aclose_async_store()

    ids = asyncio.run(run())
    ready = coordinator.execute(
        "SELECT id, org_id FROM workqueue_ready WHERE id = ANY(%s) ORDER BY org_id = %s DESC",
        [ids, a.org_id],
    ).fetchall()
    assert ready == [(ids[0], a.org_id), (ids[1], b.org_id)]
    assert api.status_of(b.ctx, ids[1]).status == api.Status.PENDING
