"""What the product's row-level security needs on Citus: the tenant policy holds on every
shard, but only if the tenant's name reaches the shards.

Tenants A and B live on different workers. The product names its tenant with
``set_config(..., true)`` (wqcore.scope.SET_TENANT), which Citus never sends to the workers:
those queries see 0 rows. What reaches them: ``citus.propagate_set_commands = 'local'`` as the
login's default and ``SET LOCAL app.org_id`` sent as its own statement.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.citus.conftest import tenant_url
from wqcore.scope import SET_TENANT


def set_local(cur: psycopg.Cursor, org_id: uuid.UUID) -> None:
    # Its own statement: Citus re-sends the whole client query string to the workers.
    cur.execute(f"SET LOCAL app.org_id = '{org_id}'".encode())


def seen(policy: str, org_id: uuid.UUID) -> list[uuid.UUID]:
    with psycopg.connect(tenant_url()) as conn, conn.cursor() as cur:
        set_local(cur, org_id)
        return [row[0] for row in cur.execute(f"SELECT org_id FROM {policy}".encode())]


def test_policy_holds_on_every_shard(policy: str, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    a, b = tenants
    assert seen(policy, a) == [a, a, a]
    assert seen(policy, b) == [b, b, b]


def test_policy_refuses_writing_another_tenants_row(
    policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, b = tenants
    with psycopg.connect(tenant_url()) as conn, conn.cursor() as cur:
        set_local(cur, a)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            cur.execute(f"INSERT INTO {policy} VALUES (%s, 9, 'y')".encode(), [b])


def test_set_config_never_reaches_the_shards(
    policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """The failure mode: the coordinator knows the tenant, the shards do not, 0 rows."""
    a, _ = tenants
    with psycopg.connect(tenant_url()) as conn, conn.cursor() as cur:
        cur.execute(SET_TENANT.encode(), {"org_id": str(a)})
        named = cur.execute(b"SELECT current_setting('app.org_id')").fetchone()
        rows = cur.execute(f"SELECT count(*) FROM {policy} WHERE org_id = %s".encode(), [a])
        assert named == (str(a),)
        assert rows.fetchone() == (0,)


def test_set_local_in_an_implicit_pipeline_never_reaches_the_shards(
    policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """Up to the pipeline's Sync is one implicit transaction: the coordinator takes the SET
    LOCAL, Citus sends it on to no worker (so the async face opens an explicit one)."""
    a, _ = tenants
    with psycopg.connect(tenant_url(), autocommit=True) as conn:
        cur = psycopg.RawCursor(conn)
        with conn.pipeline():
            conn.execute(f"SET LOCAL app.org_id = '{a}'".encode())
            cur.execute(f"SELECT count(*) FROM {policy}".encode())
        assert cur.fetchone() == (0,)
        with conn.pipeline(), conn.transaction():
            conn.execute(f"SET LOCAL app.org_id = '{a}'".encode())
            cur.execute(f"SELECT count(*) FROM {policy}".encode())
        assert cur.fetchone() == (3,)


def test_set_local_batched_with_a_query_is_refused(
    policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, _ = tenants
    with psycopg.connect(tenant_url()) as conn, conn.cursor() as cur:
        with pytest.raises(psycopg.Error, match="distributed query"):
            cur.execute(f"SET LOCAL app.org_id = '{a}'; SELECT count(*) FROM {policy}".encode())


def test_a_shard_with_no_tenant_named_fails_loudly(
    loud_policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, _ = tenants
    with psycopg.connect(tenant_url()) as conn, conn.cursor() as cur:
        cur.execute(SET_TENANT.encode(), {"org_id": str(a)})
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="no tenant named"):
            cur.execute(f"SELECT count(*) FROM {loud_policy} WHERE org_id = %s".encode(), [a])


def test_the_loud_policy_serves_a_named_tenant(
    loud_policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, b = tenants
    assert seen(loud_policy, a) == [a, a, a]
    assert seen(loud_policy, b) == [b, b, b]
