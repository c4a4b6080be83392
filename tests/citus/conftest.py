"""Citus clusters for tests/citus: a coordinator and two workers that ``bin/citus start`` runs.

These tests run only under ``bin/test --citus`` (which starts the clusters and sets
CITUS_URL); otherwise every test here is skipped with one reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

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
