"""How the transitions reach PostgreSQL: named statements, run scoped to a tenant or as system.

Each statement lives in ``sql/<name>.sql`` with a line of intent. ``run_scoped`` runs one under
a tenant in a single round trip: outside a transaction it sends ``set_config`` and the statement
as one simple query, which PostgreSQL runs as one implicit transaction, so the tenant setting
ends with it; inside the caller's transaction it nests a ``tenant_scope``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from django.db import connections

from tenancy.scope import SYSTEM_ALIAS, tenant_scope
from workqueue.models import WorkItem

SQL_DIR = Path(__file__).with_name("sql")
_SET_TENANT = "SELECT set_config('app.org_id', %(org_id)s, true);\n"

Params = dict[str, Any]


@cache
def load_sql(name: str) -> str:
    """The statement in ``sql/<name>.sql``, its comment lines kept (they name it in logs)."""
    return (SQL_DIR / f"{name}.sql").read_text().strip().rstrip(";")


@cache
def _field_order(names: tuple[str, ...]) -> tuple[list[int], list[str]]:
    """Where each model field sits among the result's columns (from_db wants model order)."""
    attnames = [f.attname for f in WorkItem._meta.concrete_fields]
    return [names.index(name) for name in attnames], attnames


def items_from_rows(
    alias: str, names: Sequence[str], rows: Iterable[Sequence[Any]]
) -> list[WorkItem]:
    """Work items from ``SELECT *``/``RETURNING *`` rows whose columns are ``names``."""
    order, attnames = _field_order(tuple(names))
    items = []
    for row in rows:
        item = WorkItem.from_db(alias, attnames, [row[i] for i in order])
        # Django's psycopg set-up loads text-format jsonb as text for JSONField to parse.
        if isinstance(item.payload, str):
            item.payload = json.loads(item.payload)
        items.append(item)
    return items


def _columns(cursor: Any) -> list[str]:
    """The result's column names, straight from libpq: cursor.description builds an object per
    column, which costs a single enqueue more than parsing its row."""
    result = cursor.pgresult
    if result is None:
        return []
    return [result.fname(i).decode() for i in range(result.nfields)]


def _items(cursor: Any, alias: str) -> list[WorkItem]:
    names = _columns(cursor)
    return items_from_rows(alias, names, cursor.fetchall()) if names else []


def run_scoped(org_id: uuid.UUID, name: str, params: Params) -> list[WorkItem]:
    """Run statement ``name`` on the everyday login, scoped to ``org_id``; returns its rows."""
    connection = connections["default"]
    params = {**params, "org_id": str(org_id)}
    if connection.in_atomic_block:
        with tenant_scope(org_id), connection.cursor() as cursor:
            cursor.execute(load_sql(name), params)
            return _items(cursor, "default")
    with connection.cursor() as cursor:
        cursor.execute(_SET_TENANT + load_sql(name), params)
        cursor.nextset()
        return _items(cursor, "default")


def _prepared_cursor(alias: str) -> Any:
    """A cursor that binds parameters on the server, so psycopg prepares a statement after a
    few runs: the claim and the batch completion are planned once per connection, not per call
    (planning cost as much as running them). Django's wrapper still applies its error mapping
    and execute wrappers."""
    connection = connections[alias]
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:  # Django turns preparing off unless OPTIONS ask for it
        raw.prepare_threshold = 2
        # Plan each run for its real arguments: a generic plan for an array of ids of unknown
        # length can join the whole table (measured: batch completion twice as slow).
        raw.execute("SET plan_cache_mode = force_custom_plan")
    cursor = psycopg.Cursor(raw)
    # Binary results: timestamps and uuids load without text parsing (the claim returns many).
    cursor.format = psycopg.pq.Format.BINARY
    return connection._prepare_cursor(cursor)


def fetch_scoped_prepared(
    org_id: uuid.UUID, name: str, params: Params, *, notify: str
) -> list[Any]:
    """Run statement ``name`` under ``org_id`` with server-side binding, announcing ``notify``.

    For big statements (bulk enqueue): binary parameters beat quoting thousands of values into
    the text, and the transaction's extra round trips vanish against the statement itself.
    """
    with tenant_scope(org_id), _prepared_cursor("default") as cursor:
        cursor.execute(load_sql(name), {**params, "org_id": org_id})
        rows = cursor.fetchall()
        cursor.execute("SELECT pg_notify('work_available', %(lane)s)", {"lane": notify})
        return rows


def run_prepared(name: str, params: Params, alias: str = "default") -> list[WorkItem]:
    """Run statement ``name`` as one prepared statement on ``alias``; returns its rows as items.

    The statement itself must name its tenant (the enqueue function does); a plain statement
    on the everyday login outside a tenant scope sees nothing.
    """
    with _prepared_cursor(alias) as cursor:
        cursor.execute(load_sql(name), params)
        return _items(cursor, alias)


def run_system(name: str, params: Params) -> list[WorkItem]:
    """Run statement ``name`` on the system login (BYPASSRLS); returns its rows as items.

    Only the named tenant-less operations call this; each says why in its docstring.
    """
    with _prepared_cursor(SYSTEM_ALIAS) as cursor:
        cursor.execute(load_sql(name), params)
        return _items(cursor, SYSTEM_ALIAS)


def fetch_system_columns(name: str, params: Params) -> tuple[list[str], list[Sequence[Any]]]:
    """Run statement ``name`` on the system login; returns its column names and rows."""
    with _prepared_cursor(SYSTEM_ALIAS) as cursor:
        cursor.execute(load_sql(name), params)
        names = _columns(cursor)
        return names, cursor.fetchall() if names else []


def fetch_system(name: str, params: Params) -> list[Sequence[Any]]:
    """Run statement ``name`` on the system login; returns its plain rows."""
    return fetch_system_columns(name, params)[1]
