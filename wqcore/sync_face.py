"""The sync face: plans run on Django's connections, joining the caller's transaction.

Each statement goes on a raw psycopg cursor (PostgreSQL's own placeholders, binary results)
wrapped the way Django wraps its own cursors (``_wrapped``), so errors map to Django's,
execute wrappers run and debug logging sees the statement. Statements are prepared on the
server after a few runs (``plans.prepares``).
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import psycopg
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from wqcore.conf import system_alias, tenant_alias
from wqcore.plans import (
    MUTEX_LOCK,
    MUTEX_ROW,
    PREPARE_THRESHOLD,
    Plan,
    Rows,
    Step,
    System,
    Tenant,
    TenantBatches,
    TenantChain,
    drive,
    prepares,
)
from wqcore.scope import (
    bypasses_rls,
    current_tenant,
    may_name_tenant_itself,
    naming_locally,
    set_local_tenant,
    system_scope,
    tenant_scope,
)
from wqcore.statements import GENERIC_PLAN, Statement


def column_names(cursor: Any) -> list[str]:
    """The result's column names, straight from libpq: cursor.description builds an object per
    column, which costs a single enqueue more than parsing its row."""
    result = cursor.pgresult
    if result is None or not result.nfields:
        return []
    return [result.fname(i).decode() for i in range(result.nfields)]


def _raw_cursor(raw: Any) -> psycopg.RawCursor[Any]:
    """A raw cursor with binary results on ``raw``: the statement comes with PostgreSQL's own
    placeholders, so the driver never parses its text (Statement.native_sql)."""
    cursor = psycopg.RawCursor(raw)
    cursor.format = psycopg.pq.Format.BINARY
    return cursor


def _raw_connection(alias: str) -> Any:
    """``alias``'s psycopg connection, set to prepare statements after a few runs (the claim
    and the batch completion are planned once per connection, not per call), unless
    ``prepares()`` says not to."""
    connection = connections[alias]
    connection.ensure_connection()
    raw = connection.connection
    if not prepares():
        raw.prepare_threshold = None
    elif raw.prepare_threshold is None:  # Django turns preparing off unless OPTIONS ask for it
        raw.prepare_threshold = PREPARE_THRESHOLD
    return raw


def _wrapped(connection: BaseDatabaseWrapper, cursor: Any) -> Any:
    """``cursor`` in the wrapper Django gives its own cursors (what ``connection.cursor()``
    does once it made one): checked for thread sharing, then ``make_debug_cursor`` when queries
    are logged (``DEBUG``, or a test's ``CaptureQueriesContext``), else ``make_cursor``. Both are
    the backend's public hooks; the wrapper maps errors to Django's and runs execute wrappers."""
    connection.validate_thread_sharing()
    if connection.queries_logged:
        return connection.make_debug_cursor(cursor)
    return connection.make_cursor(cursor)


def _prepared_cursor(alias: str) -> Any:
    """A new cursor on ``alias`` that binds parameters on the server (see ``_raw_connection``),
    with binary results, in Django's wrapper."""
    return _wrapped(connections[alias], _raw_cursor(_raw_connection(alias)))


# The raw cursor each Django connection's single statements share, by connection (this
# thread's, as Django keeps one per thread and alias): made again only when Django opens a new
# connection, since making one (its adapters and its transformer) is a large share of a single
# enqueue's own time. Weak: a connection object that goes (its thread ended) takes its entry.
_KEPT: weakref.WeakKeyDictionary[BaseDatabaseWrapper, psycopg.RawCursor[Any]] = (
    weakref.WeakKeyDictionary()
)

# A statement's result kept by the reused cursor (until the connection's next statement) only
# up to this many rows: a larger one is let go with its cursor.
_KEPT_ROWS_MAX = 1000


def _reused_cursor(alias: str) -> Any:
    """``_prepared_cursor``, but on the one raw cursor kept for this connection. Django's
    wrapper is made per call, so execute wrappers and debug logging are as they are now."""
    connection = connections[alias]
    raw = _raw_connection(alias)
    kept = _KEPT.get(connection)
    if kept is None or kept.connection is not raw or kept.closed:
        kept = _KEPT[connection] = _raw_cursor(raw)
    return _wrapped(connection, kept)


def _let_go_if_large(alias: str, cursor: Any) -> None:
    if cursor.rowcount > _KEPT_ROWS_MAX:
        _KEPT.pop(connections[alias], None)
        cursor.close()


def _execute_sync(
    alias: str, statement: Statement, params: NamedTuple, generic_plan: bool = False
) -> Rows:
    """``generic_plan``: send ``GENERIC_PLAN`` before the statement (see ``_plan_setting_ends``)."""
    sql, bound = statement.native_sql, statement.bind_native(params)  # compiled out of a pipeline
    if not generic_plan:
        cursor = _reused_cursor(alias)
        cursor.execute(sql, bound)
        names = column_names(cursor)
        rows = Rows(names, cursor.fetchall() if names else [])
        _let_go_if_large(alias, cursor)
        return rows
    connection = connections[alias]
    with _prepared_cursor(alias) as cursor:
        # The plan setting and the statement in one pipeline: one round trip.
        with (
            _prepared_cursor(alias) as preamble,
            connection.wrap_database_errors,
            connection.connection.pipeline(),
        ):
            preamble.execute(GENERIC_PLAN)
            cursor.execute(sql, bound)
        names = column_names(cursor)
        return Rows(names, cursor.fetchall() if names else [])


def _execute_named_locally(alias: str, step: Tenant) -> Rows:
    """A statement that names its tenant itself, in autocommit, with tenants named by
    ``SET LOCAL``: its own set_config never reaches Citus's workers, and a SET LOCAL reaches
    them only inside an explicit transaction, so BEGIN, the SET LOCAL, the statement and
    COMMIT go in one pipeline (one round trip, as the statement alone takes by default)."""
    statement = step.statement
    sql, bound = statement.native_sql, statement.bind_native(step.params)
    connection = connections[alias]
    with _prepared_cursor(alias) as cursor:
        raw = connection.connection
        with connection.wrap_database_errors, raw.pipeline(), raw.transaction():
            raw.execute(set_local_tenant(step.org_id))
            cursor.execute(sql, bound)
        names = column_names(cursor)
        return Rows(names, cursor.fetchall() if names else [])


def _plan_setting_ends(statement: Statement, alias: str) -> bool:
    """Whether ``statement`` gets its generic plan here: only when the transaction it runs in
    is its own (autocommit, or the block this module opens for it), so the setting ends with
    it. In a caller's transaction (an atomic block, autocommit off) the setting would last to
    the caller's commit, so there PostgreSQL plans it as it chooses. Never when nothing is
    prepared (``prepares``): the setting's gain is a plan kept for the next run."""
    return statement.generic_plan and connections[alias].get_autocommit() and prepares()


def _execute_batches_sync(step: TenantBatches) -> Rows:
    alias = tenant_alias()
    with tenant_scope(step.org_id, using=alias):
        connection = connections[alias]
        cursors = []
        try:
            # An error the server reports comes out of the pipeline's end, not a cursor's
            # execute: map it to Django's, as every other statement's is.
            with connection.wrap_database_errors, connection.connection.pipeline():
                for params in step.params:
                    cursor = _prepared_cursor(alias)
                    cursors.append(cursor)
                    cursor.execute(step.statement.native_sql, step.statement.bind_native(params))
            names = column_names(cursors[0]) if cursors else []
            if not names:  # a statement that returns no rows (a plain INSERT)
                return Rows([], [])
            return Rows(names, [row for cursor in cursors for row in cursor.fetchall()])
        finally:
            for cursor in cursors:
                cursor.close()


def _execute_chain_sync(step: TenantChain) -> Rows:
    alias = tenant_alias()
    with tenant_scope(step.org_id, using=alias):
        first = _execute_sync(alias, step.statement, step.params)
        for statement, params in step.then(first):
            _execute_sync(alias, statement, params)
    return first


def _execute_system_sync(step: System) -> Rows:
    alias = system_alias()
    if not bypasses_rls(alias):
        # One login that owns the tables: its statement sees every tenant inside a system scope.
        with system_scope():
            if step.serialize is not None:
                _take_mutex(alias, step.serialize)
            return _execute_sync(alias, step.statement, step.params)
    generic_plan = _plan_setting_ends(step.statement, alias)
    if step.serialize is None:
        return _execute_sync(alias, step.statement, step.params, generic_plan)
    with transaction.atomic(using=alias):
        _take_mutex(alias, step.serialize)
        return _execute_sync(alias, step.statement, step.params, generic_plan)


def _take_mutex(alias: str, name: str) -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute(MUTEX_ROW, {"name": name})
        cursor.execute(MUTEX_LOCK, {"name": name})


def execute(step: Step) -> Rows:
    """Run one step on the sync face (Django's connections)."""
    if isinstance(step, TenantBatches):
        return _execute_batches_sync(step)
    if isinstance(step, TenantChain):
        return _execute_chain_sync(step)
    if isinstance(step, System):
        return _execute_system_sync(step)
    alias = tenant_alias()
    connection = connections[alias]
    if current_tenant(connection) == str(step.org_id) or (
        step.statement.names_tenant and may_name_tenant_itself(connection, step.org_id)
    ):
        return _execute_sync(alias, step.statement, step.params)
    if step.statement.names_tenant and connection.get_autocommit() and naming_locally():
        if not connection.in_atomic_block:
            return _execute_named_locally(alias, step)
    with tenant_scope(step.org_id, using=alias):
        return _execute_sync(alias, step.statement, step.params)


def run[T](plan: Plan[T]) -> T:
    """Drive ``plan`` on the sync face; returns what the plan returns. A step's error is raised
    in the plan, where it yielded the step."""
    return drive(plan, execute)
