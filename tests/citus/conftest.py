"""Citus clusters for tests/citus: a coordinator and two workers that ``bin/citus start`` runs.

These tests run only under ``bin/test --citus`` (which starts the clusters and sets
CITUS_URL); otherwise every test here is skipped with one reason.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import psycopg
import pytest

from tenancy.contexts import AppType, OpContext, Role, new_request_context
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


def _product_settings() -> dict[str, Any]:
    from django.conf import settings

    return {
        **settings.WORKQUEUE,
        "DATABASE_ALIAS": "citus_app",
        "SYSTEM_DATABASE_ALIAS": "citus_system",
        "OWNER_DATABASE_ALIAS": "citus_owner",
        "LISTEN_DATABASE_ALIAS": None,
        "TENANT_NAMING": "set_local",
        "HISTORY": False,
        "CITUS": True,
    }


@pytest.fixture(scope="session")
def laid_out(django_db_blocker: Any) -> Iterator[None]:
    """The product's migrated schema on the coordinator, laid out by ``citus_distribute``, with
    the orgs tenancy's three logins as Django aliases. Migrate and distribute are both
    idempotent: a second session finds nothing to do."""
    from django.core.management import call_command
    from django.db import connections
    from django.test import override_settings

    from tenancy.logins import ensure_logins

    for alias, login in PRODUCT_ALIASES.items():
        _add_alias(alias, login)
    owner, app, system = (connections.settings[a] for a in PRODUCT_ALIASES)
    with django_db_blocker.unblock():
        with override_settings(WORKQUEUE=_product_settings()):
            ensure_logins(app, system, owner)
            call_command("migrate", database="citus_owner", verbosity=0)
            call_command("citus_distribute", database="citus_owner", verbosity=0)
        try:
            yield
        finally:
            for alias in PRODUCT_ALIASES:
                connections[alias].close()


@pytest.fixture
def product(laid_out: None) -> Iterator[dict[str, str]]:
    """The laid-out product, with WORKQUEUE naming its aliases (set_local mode, CITUS on)."""
    from django.test import override_settings

    with override_settings(WORKQUEUE=_product_settings()):
        yield PRODUCT_ALIASES


class Tenant(NamedTuple):
    org_id: uuid.UUID
    ctx: OpContext
    port: int


def new_tenant(coordinator: psycopg.Connection, avoid: int | None = None) -> Tenant:
    """A new org whose work items' shard is not on the worker ``avoid``."""
    from tenancy.models import Org

    while True:
        org_id = uuid.uuid4()
        port = node_of(coordinator, "workqueue_workitem", org_id)
        if port != avoid:
            break
    Org.objects.using("citus_owner").create(id=org_id, name="t", slug=f"t-{org_id.hex[:12]}")
    rctx = new_request_context(AppType.WEB, traceparent=None)
    return Tenant(org_id, OpContext(org_id=org_id, user_id="1", role=Role.MEMBER, rctx=rctx), port)


def remote_commands(alias: str) -> list[str]:
    """Collect the commands Citus sends to the workers from this connection (as notices)."""
    from django.db import connections

    seen: list[str] = []
    conn = connections[alias]
    conn.ensure_connection()
    raw: Any = conn.connection

    def heard(diag: Any) -> None:
        seen.append(f"{diag.message_primary} | {diag.message_detail or ''}")

    raw.add_notice_handler(heard)
    return seen


def written_ports(seen: list[str]) -> set[int]:
    """The workers' ports the commands in ``seen`` (``remote_commands``) wrote on."""
    return {
        int(port)
        for line in seen
        if re.search(r"issuing (INSERT|UPDATE|DELETE|WITH)", line)
        for port in re.findall(r":(\d+) connectionId", line)
    }


SITE_TABLE = "citus_site_order"


@pytest.fixture
def site_table(product: dict[str, str], coordinator: psycopg.Connection) -> Iterator[str]:
    """The site's own tenant table, distributed by org_id beside the queue's, as the Citus page
    says: colocated with workqueue_workitem, under the tenant policy, granted to the login."""
    coordinator.execute(f"DROP TABLE IF EXISTS {SITE_TABLE}")
    coordinator.execute(
        f"CREATE TABLE {SITE_TABLE} (org_id uuid NOT NULL, id bigint NOT NULL, body text,"
        " PRIMARY KEY (org_id, id))"
    )
    coordinator.execute(
        "SELECT create_distributed_table(%s, 'org_id', colocate_with => 'workqueue_workitem')",
        [SITE_TABLE],
    )
    coordinator.execute(f"ALTER TABLE {SITE_TABLE} ENABLE ROW LEVEL SECURITY")
    coordinator.execute(f"ALTER TABLE {SITE_TABLE} FORCE ROW LEVEL SECURITY")
    coordinator.execute(
        f"CREATE POLICY tenant_isolation ON {SITE_TABLE}"
        " USING (org_id = NULLIF(current_setting('app.org_id', true), '')::uuid)"
        " WITH CHECK (org_id = NULLIF(current_setting('app.org_id', true), '')::uuid)"
    )
    coordinator.execute(f"GRANT SELECT, INSERT ON {SITE_TABLE} TO wq_citus_app")
    yield SITE_TABLE
    coordinator.execute(f"DROP TABLE {SITE_TABLE}")
