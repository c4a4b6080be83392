"""Citus clusters for tests/citus: a coordinator and two workers that ``bin/citus start`` runs.

These tests run only under ``bin/test --citus`` (which starts the clusters and sets
CITUS_URL); otherwise every test here is skipped with one reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tenancy.rls import SQL_DIR
from wqcore.sqlfiles import run_sql_file

URL = os.environ.get("CITUS_URL", "")
TENANT_LOGIN = "wq_citus_tenant"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if URL:
        return
    skip = pytest.mark.skip(reason="Citus tests: run bin/test --citus")
    for item in items:
        if "tests/citus/" in item.nodeid:
            item.add_marker(skip)


def tenant_url() -> str:
    return URL.replace("postgres@", f"{TENANT_LOGIN}@", 1)


@pytest.fixture
def coordinator() -> Iterator[psycopg.Connection]:
    with psycopg.connect(URL, autocommit=True) as conn:
        yield conn


@pytest.fixture
def table(coordinator: psycopg.Connection) -> Iterator[str]:
    """A fresh distributed tenant table; the login that uses it is a plain one."""
    name = f"wq_citus_{uuid.uuid4().hex[:8]}"
    coordinator.execute(
        f"DO $$ BEGIN CREATE ROLE {TENANT_LOGIN} LOGIN; "
        "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    coordinator.execute(f"CREATE TABLE {name} (org_id uuid NOT NULL, id bigint, body text)")
    coordinator.execute("SELECT create_distributed_table(%s, 'org_id', shard_count := 4)", [name])
    coordinator.execute(f"GRANT SELECT, INSERT ON {name} TO {TENANT_LOGIN}")
    yield name
    coordinator.execute(f"DROP TABLE {name}")


def node_of(conn: psycopg.Connection, table: str, org_id: uuid.UUID) -> int:
    """The port of the worker holding ``org_id``'s shard of ``table``."""
    row = conn.execute(
        "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
        " WHERE p.shardid = get_shard_id_for_distribution_column(%s, %s)",
        [table, org_id],
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def tenants(coordinator: psycopg.Connection, table: str) -> tuple[uuid.UUID, uuid.UUID]:
    """Two tenants whose rows live on different workers, three rows each."""
    a = uuid.uuid4()
    b = uuid.uuid4()
    while node_of(coordinator, table, b) == node_of(coordinator, table, a):
        b = uuid.uuid4()
    for org in (a, b):
        for i in range(3):
            coordinator.execute(f"INSERT INTO {table} VALUES (%s, %s, 'x')", [org, i])
    return a, b


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


PRODUCT_ALIASES = {
    "citus_owner": "postgres",
    "citus_app": "wq_citus_app",
    "citus_system": "wq_citus_system",
}


def _add_alias(alias: str, login: str) -> None:
    from django.db import connections

    from project.database import parse

    url = URL.replace("postgres@", f"{login}@", 1)
    given = {**connections.settings, alias: parse(alias, url)}
    connections.settings[alias] = connections.configure_settings(given)[alias]


@pytest.fixture(scope="session")
def product(django_db_blocker: Any) -> Iterator[dict[str, str]]:
    """The product's migrated schema on the coordinator, laid out by ``citus_distribute``, with
    the orgs tenancy's three logins as Django aliases; WORKQUEUE names them (set_local mode)
    for the whole session. Migrate and distribute are both idempotent: a second session finds
    nothing to do."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from django.test import override_settings

    from tenancy.logins import ensure_logins

    for alias, login in PRODUCT_ALIASES.items():
        _add_alias(alias, login)
    owner, app, system = (connections.settings[a] for a in PRODUCT_ALIASES)
    queue = {
        **settings.WORKQUEUE,
        "DATABASE_ALIAS": "citus_app",
        "SYSTEM_DATABASE_ALIAS": "citus_system",
        "OWNER_DATABASE_ALIAS": "citus_owner",
        "LISTEN_DATABASE_ALIAS": None,
        "TENANT_NAMING": "set_local",
        "HISTORY": False,
        "CITUS": True,
    }
    with django_db_blocker.unblock(), override_settings(WORKQUEUE=queue):
        ensure_logins(app, system, owner)
        call_command("migrate", database="citus_owner", verbosity=0)
        call_command("citus_distribute", database="citus_owner", verbosity=0)
        try:
            yield PRODUCT_ALIASES
        finally:
            for alias in PRODUCT_ALIASES:
                connections[alias].close()
