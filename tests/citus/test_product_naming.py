"""The product's own naming of a tenant on Citus: ``WORKQUEUE["TENANT_NAMING"] = "set_local"``.

Tenants A and B live on different workers. Through ``tenant_scope`` and
``deferred_tenant_scope`` (Django's connection, the everyday login, as every tenant statement
of the product runs) and through the async face's shape (a pipeline: the naming, then the
statement), each tenant sees exactly its own rows and never the other's. With the prototype
policy that raises where no tenant is named, a statement that reaches a shard unnamed fails.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import pytest
from django.conf import settings
from django.db import connections, transaction
from django.db.utils import ProgrammingError
from django.test import override_settings

from project.database import parse
from tenancy.logins import ensure_logins
from tests.citus.conftest import TENANT_LOGIN, URL, node_of, tenant_url
from workqueue.checks import naming_problem
from wqcore import sync_face
from wqcore.async_face import AsyncStore
from wqcore.plans import Tenant
from wqcore.scope import deferred_tenant_scope, tenant_scope
from wqcore.statements import Statement

ALIAS = "citus_tenant"


@pytest.fixture
def set_local() -> Iterator[None]:
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANT_NAMING": "set_local"}):
        yield


@pytest.fixture
def alias(django_db_blocker: Any) -> Iterator[str]:
    """A Django alias on the coordinator as the plain tenant login."""
    given = {**connections.settings, ALIAS: parse(ALIAS, tenant_url())}
    config = connections.configure_settings(given)[ALIAS]
    connections.settings[ALIAS] = config
    with django_db_blocker.unblock():
        try:
            yield ALIAS
        finally:
            connections[ALIAS].close()
            del connections[ALIAS]
            del connections.settings[ALIAS]


def _org_ids(alias: str, table: str, where: str = "", *params: Any) -> list[uuid.UUID]:
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT org_id FROM {table} {where}", params)
        return [row[0] for row in cursor.fetchall()]


def test_on_different_workers(
    coordinator: psycopg.Connection, policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, b = tenants
    assert node_of(coordinator, policy, a) != node_of(coordinator, policy, b)


def test_tenant_scope_sees_exactly_its_own_rows_on_each_worker(
    set_local: None, alias: str, policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, b = tenants
    for mine, theirs in ((a, b), (b, a)):
        with tenant_scope(mine, using=alias):
            assert _org_ids(alias, policy) == [mine] * 3
            assert _org_ids(alias, policy, "WHERE org_id = %s", theirs) == []


def test_deferred_scope_sees_exactly_its_own_rows(
    set_local: None, alias: str, policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, b = tenants
    for mine in (a, b):
        with deferred_tenant_scope(mine, using=alias):
            assert _org_ids(alias, policy) == [mine] * 3


def test_nested_scopes_name_each_tenant_and_put_the_outer_back(
    set_local: None, alias: str, policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, b = tenants
    with transaction.atomic(using=alias):
        with tenant_scope(a, using=alias):
            assert _org_ids(alias, policy) == [a] * 3
            with tenant_scope(b, using=alias):
                assert _org_ids(alias, policy) == [b] * 3
            assert _org_ids(alias, policy) == [a] * 3


def test_a_write_for_another_tenant_is_refused_on_its_worker(
    set_local: None, alias: str, policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    a, b = tenants
    with pytest.raises(ProgrammingError, match="row-level security"):
        with tenant_scope(a, using=alias):
            with connections[alias].cursor() as cursor:
                cursor.execute(f"INSERT INTO {policy} VALUES (%s, 9, 'y')", [b])
    with tenant_scope(a, using=alias):
        with connections[alias].cursor() as cursor:
            cursor.execute(f"INSERT INTO {policy} VALUES (%s, 9, 'y')", [a])
    with tenant_scope(a, using=alias):
        assert _org_ids(alias, policy) == [a] * 4


class Least(NamedTuple):
    least: int


def test_the_async_face_names_the_tenant_on_the_workers(
    set_local: None, alias: str, policy: str, tenants: tuple[uuid.UUID, uuid.UUID], tmp_path: Path
) -> None:
    """The async face's own tenant step (its pool, its pipeline, its preamble), each tenant
    named on its own worker."""
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "citus_read.sql").write_text(
        f"SELECT org_id FROM {policy} WHERE id >= %(least)s"
    )
    read = Statement("citus_read", Least, tmp_path / "sql")

    async def run() -> list[list[Any]]:
        store = AsyncStore()
        try:
            return [
                [row[0] for row in (await store.execute(Tenant(org, read, Least(0)))).rows]
                for org in tenants
            ]
        finally:
            await store.aclose()

    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "DATABASE_ALIAS": alias}):
        seen = asyncio.run(run())
    a, b = tenants
    assert seen == [[a] * 3, [b] * 3]


class Named(NamedTuple):
    org_id: uuid.UUID


def test_a_statement_that_names_its_tenant_itself_is_named_on_the_workers(
    set_local: None, alias: str, policy: str, tenants: tuple[uuid.UUID, uuid.UUID], tmp_path: Path
) -> None:
    """The sync face's bare statement that names its tenant itself (as the enqueue does), in
    autocommit: its own set_config would reach no worker; SET LOCAL goes before it."""
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "citus_named.sql").write_text(
        f"SELECT org_id FROM {policy} WHERE (SELECT {{set_tenant}}) IS NOT NULL"
    )
    read = Statement("citus_named", Named, tmp_path / "sql", names_tenant=True)
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "DATABASE_ALIAS": alias}):
        seen = [sync_face.execute(Tenant(org, read, Named(org))).column() for org in tenants]
    a, b = tenants
    assert seen == [[a] * 3, [b] * 3]


def test_create_logins_sets_the_propagation_on_citus(coordinator: psycopg.Connection) -> None:
    """``manage.py create_logins``'s own step, against the coordinator: both logins get
    ``citus.propagate_set_commands = 'local'`` as their default."""
    owner = parse("owner", URL)
    app = {**owner, "USER": "wq_citus_app", "PASSWORD": ""}
    system = {**owner, "USER": "wq_citus_system", "PASSWORD": ""}
    ensure_logins(app, system, owner)
    rows = coordinator.execute(
        "SELECT r.rolname, s.setconfig FROM pg_db_role_setting s"
        " JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname IN (%s, %s)",
        [app["USER"], system["USER"]],
    ).fetchall()
    assert sorted(name for name, _ in rows) == [app["USER"], system["USER"]]
    for _, config in rows:
        assert "citus.propagate_set_commands=local" in config


def test_unnamed_on_a_shard_fails_and_named_is_served(
    alias: str, loud_policy: str, tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """With the prototype policy: set_config mode (the default) reaches no shard, and the
    shard says so instead of answering 0 rows; set_local mode is served."""
    a, _ = tenants
    with pytest.raises(ProgrammingError, match="no tenant named"):
        with tenant_scope(a, using=alias):
            _org_ids(alias, loud_policy, "WHERE org_id = %s", a)
    with pytest.raises(ProgrammingError, match="no tenant named"):
        _org_ids(alias, loud_policy, "WHERE org_id = %s", a)
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANT_NAMING": "set_local"}):
        with tenant_scope(a, using=alias):
            assert _org_ids(alias, loud_policy) == [a] * 3


def test_the_startup_check_says_what_a_citus_database_needs(
    coordinator: psycopg.Connection, alias: str, policy: str, laid_out: None
) -> None:
    assert "set WORKQUEUE['TENANT_NAMING'] = 'set_local'" in (naming_problem(alias) or "")
    local = {**settings.WORKQUEUE, "TENANT_NAMING": "set_local"}
    with override_settings(WORKQUEUE=local):
        # The queue's tables on this database are distributed (the laid_out fixture).
        assert "set WORKQUEUE['CITUS'] = True" in (naming_problem(alias) or "")
    with override_settings(WORKQUEUE={**local, "CITUS": True}):
        assert "set WORKQUEUE['HISTORY'] = False" in (naming_problem(alias) or "")
    with override_settings(WORKQUEUE={**local, "CITUS": True, "HISTORY": False}):
        assert naming_problem(alias) is None
        coordinator.execute(f"ALTER ROLE {TENANT_LOGIN} RESET citus.propagate_set_commands")
        try:
            connections[alias].close()
            assert "run manage.py create_logins" in (naming_problem(alias) or "")
        finally:
            coordinator.execute(
                f"ALTER ROLE {TENANT_LOGIN} SET citus.propagate_set_commands = 'local'"
            )
