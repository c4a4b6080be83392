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

from tenancy.rls import SQL_DIR
from tests.citus.conftest import TENANT_LOGIN, tenant_url
from wqcore.scope import SET_TENANT
from wqcore.sqlfiles import run_sql_file


@pytest.fixture
def policy(coordinator: psycopg.Connection, table: str) -> str:
    """The product's own tenant policy, applied as its migrations apply it."""
    sql = run_sql_file(SQL_DIR, "tenant_policy", table=table, column="org_id").sql
    assert isinstance(sql, str)
    run_each(coordinator, sql)
    coordinator.execute(
        f"ALTER ROLE {TENANT_LOGIN} SET citus.propagate_set_commands = 'local'".encode()
    )
    return table


def run_each(conn: psycopg.Connection, sql: str) -> None:
    """Each statement on its own: Citus sends a DDL's whole query string to the workers."""
    code = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    for statement in code.split(";"):
        if statement.strip():
            conn.execute(statement.encode())


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


def test_set_local_batched_with_a_query_is_refused(
    policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, _ = tenants
    with psycopg.connect(tenant_url()) as conn, conn.cursor() as cur:
        with pytest.raises(psycopg.Error, match="distributed query"):
            cur.execute(f"SET LOCAL app.org_id = '{a}'; SELECT count(*) FROM {policy}".encode())


LOUD_TENANT = """
CREATE OR REPLACE FUNCTION wq_citus_named_tenant() RETURNS uuid LANGUAGE plpgsql STABLE AS $$
DECLARE
    v text := current_setting('app.org_id', true);
BEGIN
    IF coalesce(v, '') = '' THEN
        RAISE EXCEPTION 'no tenant named on this node (port %%)', current_setting('port')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v::uuid;
END $$
"""


@pytest.fixture
def loud_policy(coordinator: psycopg.Connection, table: str) -> str:
    """A prototype: the tenant policy through a function that raises when no tenant is named,
    so a statement reaching a shard without one fails instead of seeing 0 rows."""
    coordinator.execute(LOUD_TENANT.replace("%%", "%").encode())
    run_each(
        coordinator,
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;"
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;"
        f"CREATE POLICY tenant_isolation ON {table}"
        " USING (org_id = wq_citus_named_tenant())"
        " WITH CHECK (org_id = wq_citus_named_tenant())",
    )
    coordinator.execute(
        f"ALTER ROLE {TENANT_LOGIN} SET citus.propagate_set_commands = 'local'".encode()
    )
    return table


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
