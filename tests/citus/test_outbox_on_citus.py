"""The outbox on Citus: a view's domain write and its ``outbox.emit`` commit together on the
tenant's node (no two-phase commit), the emit announced from the coordinator; the relay reads
the tenants with pending rows across nodes, then takes and marks each one's rows on its node,
enqueueing their work in their tenant."""

from __future__ import annotations

import uuid

import psycopg
from django.db import connections, transaction

from outbox.emit import emit
from outbox.relay import relay_all
from tenancy.contexts import AppType, new_request_context
from tests.citus.conftest import URL, Tenant, new_tenant, remote_commands, written_ports
from wqcore.scope import tenant_scope

APP = "citus_app"


def _order_and_emit(t: Tenant, n: int, site_table: str) -> uuid.UUID:
    with transaction.atomic(using=APP), tenant_scope(t.org_id, using=APP):
        with connections[APP].cursor() as cursor:
            cursor.execute(f"INSERT INTO {site_table} VALUES (%s, %s, 'order')", [t.org_id, n])
        return emit(t.ctx, "work.NOOP", {})


def test_a_write_and_its_emit_commit_on_one_node_and_the_relay_enqueues_them(
    site_table: str, coordinator: psycopg.Connection
) -> None:
    a = new_tenant(coordinator)
    b = new_tenant(coordinator, avoid=a.port)
    prepared = coordinator.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
    seen = remote_commands(APP)
    with connections[APP].cursor() as cursor:
        cursor.execute("SET citus.log_remote_commands = on")
        cursor.execute("SET client_min_messages = log")
    try:
        with psycopg.connect(URL, autocommit=True) as listener:
            listener.execute("LISTEN outbox_pending")
            row_a = _order_and_emit(a, 1, site_table)
            heard = list(listener.notifies(timeout=10, stop_after=1))
    finally:
        with connections[APP].cursor() as cursor:
            cursor.execute("RESET client_min_messages")
            cursor.execute("RESET citus.log_remote_commands")
    row_b = _order_and_emit(b, 1, site_table)
    assert len(heard) == 1  # announced from the coordinator, at commit
    written = written_ports(seen)
    assert written == {a.port}, seen
    assert not [line for line in seen if "PREPARE TRANSACTION" in line], seen
    assert not [line for line in seen if "COPY" in line], seen
    after = coordinator.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
    assert after == prepared
    # The relay: both tenants' rows, each on its node, their work enqueued in their tenant.
    relayed = relay_all(new_request_context(AppType.SWEEP), batch=100)
    assert relayed.enqueued >= 2
    rows = coordinator.execute(
        "SELECT o.id, o.org_id, o.status, w.status, w.org_id FROM workqueue_outbox_outboxrow o"
        " LEFT JOIN workqueue_workitem w ON w.org_id = o.org_id AND w.id = o.id"
        " WHERE o.id = ANY(%s) ORDER BY o.org_id = %s DESC",
        [[row_a, row_b], a.org_id],
    ).fetchall()
    assert rows == [
        (row_a, a.org_id, "relayed", "pending", a.org_id),
        (row_b, b.org_id, "relayed", "pending", b.org_id),
    ]
    assert relay_all(new_request_context(AppType.SWEEP), batch=100).total == 0
