"""The store: every transition is a plan of named statements, run by one of two faces.

A plan is a generator that yields steps and receives each step's rows: ``Tenant(org_id,
statement, params)`` runs on the everyday login under that tenant (row-level security
applies), ``System(statement, params)`` on the system login (BYPASSRLS, for the named
tenant-less operations). The plan holds the logic once; ``run`` drives it on the sync face
(Django's connections, joining the caller's transaction) and ``arun`` on the async face (the
store's own psycopg async pools, on the caller's event loop), so the two faces cannot drift.

Both faces prepare their statements on the server (each is planned once per connection)
unless a transaction pooler is in front (``WORKQUEUE["POOLER"] = "transaction"``, ``prepares``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
from django.db import connections, transaction
from psycopg_pool import AsyncConnectionPool

from wqcore.conf import system_alias, tenant_alias, wq_settings
from wqcore.scope import (
    SET_ALL_TENANTS,
    SET_TENANT,
    bypasses_rls,
    current_tenant,
    may_name_tenant_itself,
    system_scope,
    tenant_scope,
)
from wqcore.statements import GENERIC_PLAN, Statement


class Rows(NamedTuple):
    """A statement's result: its column names and rows."""

    names: list[str]
    rows: list[Sequence[Any]]

    def column(self, index: int = 0) -> list[Any]:
        return [row[index] for row in self.rows]


@dataclass(frozen=True)
class Tenant:
    """Run ``statement`` on the everyday login, scoped to ``org_id``."""

    org_id: uuid.UUID
    statement: Statement
    params: NamedTuple


@dataclass(frozen=True)
class System:
    """Run ``statement`` on the system login, across tenants. With ``serialize`` (a mutex's
    name), it runs after taking that mutex in the same transaction: statements that name the
    same mutex run one at a time, and each sees what the one before it committed (it starts
    after the lock, so its snapshot does)."""

    statement: Statement
    params: NamedTuple
    serialize: str | None = None


@dataclass(frozen=True)
class TenantBatches:
    """Run ``statement`` once per ``params`` on the everyday login, scoped to ``org_id``, all
    in one transaction: each run is sent (psycopg's pipeline mode) before the next ``params``
    is made, so the caller's work on the next batch overlaps the server's on this one. If
    making one raises, nothing of any is kept. The step's rows are every run's, in order."""

    org_id: uuid.UUID
    statement: Statement
    params: Iterable[NamedTuple]


# Take a mutex (workqueue.models.Mutex) until the transaction ends: make its row if it is new,
# then lock it. Only the system login may: the everyday login has no right on the table.
_MUTEX_ROW = "INSERT INTO workqueue_mutex (name) VALUES (%(name)s) ON CONFLICT DO NOTHING"
_MUTEX_LOCK = "SELECT FROM workqueue_mutex WHERE name = %(name)s FOR UPDATE"


Step = Tenant | System | TenantBatches
Plan = Generator[Step, Rows, Any]


def _column_names(cursor: Any) -> list[str]:
    """The result's column names, straight from libpq: cursor.description builds an object per
    column, which costs a single enqueue more than parsing its row."""
    result = cursor.pgresult
    if result is None or not result.nfields:
        return []
    return [result.fname(i).decode() for i in range(result.nfields)]


# -- preparing ----------------------------------------------------------------------------------

# psycopg prepares a statement at its second run on a connection, and then only binds it.
PREPARE_THRESHOLD = 2


def prepares() -> bool:
    """Whether the store prepares its statements on the server, so each is planned once per
    connection (see ``_configure``). Not behind a transaction pooler (``WORKQUEUE["POOLER"]``):
    it runs each transaction on whichever server connection is free, where a statement
    prepared on another one does not exist (``prepared statement "_pg3_0" does not exist``),
    or another client's exists under the same name (``... already exists``)."""
    return wq_settings.POOLER != "transaction"


# -- the sync face: Django's connections --------------------------------------------------------


def _raw_cursor(raw: Any) -> psycopg.RawCursor[Any]:
    """A raw cursor with binary results on ``raw``: the statement comes with PostgreSQL's own
    placeholders, so the driver never parses its text (Statement.native_sql)."""
    cursor = psycopg.RawCursor(raw)
    cursor.format = psycopg.pq.Format.BINARY
    return cursor


def _raw_connection(alias: str) -> Any:
    """``alias``'s psycopg connection, set to prepare statements after a few runs (the claim
    and the batch completion are planned once per connection, not per call; see
    ``_configure``), unless ``prepares()`` says not to."""
    connection = connections[alias]
    connection.ensure_connection()
    raw = connection.connection
    if not prepares():
        raw.prepare_threshold = None
    elif raw.prepare_threshold is None:  # Django turns preparing off unless OPTIONS ask for it
        raw.prepare_threshold = PREPARE_THRESHOLD
    return raw


def _prepared_cursor(alias: str) -> Any:
    """A new cursor on ``alias`` that binds parameters on the server (see ``_raw_connection``),
    with binary results. Django's wrapper still maps errors and runs execute wrappers."""
    return connections[alias]._prepare_cursor(_raw_cursor(_raw_connection(alias)))


# A statement's result kept by the reused cursor (until the connection's next statement) only
# up to this many rows: a larger one is let go with its cursor.
_KEPT_ROWS_MAX = 1000


def _reused_cursor(alias: str) -> Any:
    """``_prepared_cursor``, but one raw cursor per connection, made again only when Django
    opens a new connection: making a cursor (its adapters and transformer) cost a single
    enqueue 38 µs of its ~430 on this machine (issue 22). Django's wrapper is made per call, so
    execute wrappers and debug logging are as they are now."""
    connection = connections[alias]
    raw = _raw_connection(alias)
    kept = getattr(connection, "_workqueue_cursor", None)
    if kept is None or kept.connection is not raw or kept.closed:
        kept = _raw_cursor(raw)
        connection._workqueue_cursor = kept
    return connection._prepare_cursor(kept)


def _let_go_if_large(alias: str, cursor: Any) -> None:
    if cursor.rowcount > _KEPT_ROWS_MAX:
        connections[alias]._workqueue_cursor = None
        cursor.close()


def _execute_sync(
    alias: str, statement: Statement, params: NamedTuple, generic_plan: bool = False
) -> Rows:
    """``generic_plan``: send ``GENERIC_PLAN`` before the statement (see ``_plan_setting_ends``)."""
    sql, bound = statement.native_sql, statement.bind_native(params)  # compiled out of a pipeline
    if not generic_plan:
        cursor = _reused_cursor(alias)
        cursor.execute(sql, bound)
        names = _column_names(cursor)
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
        names = _column_names(cursor)
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
            names = _column_names(cursors[0]) if cursors else []
            if not names:  # a statement that returns no rows (a plain INSERT)
                return Rows([], [])
            return Rows(names, [row for cursor in cursors for row in cursor.fetchall()])
        finally:
            for cursor in cursors:
                cursor.close()


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
        cursor.execute(_MUTEX_ROW, {"name": name})
        cursor.execute(_MUTEX_LOCK, {"name": name})


def execute(step: Step) -> Rows:
    """Run one step on the sync face (Django's connections)."""
    if isinstance(step, TenantBatches):
        return _execute_batches_sync(step)
    if isinstance(step, System):
        return _execute_system_sync(step)
    alias = tenant_alias()
    connection = connections[alias]
    if current_tenant(connection) == str(step.org_id) or (
        step.statement.names_tenant and may_name_tenant_itself(connection, step.org_id)
    ):
        return _execute_sync(alias, step.statement, step.params)
    with tenant_scope(step.org_id, using=alias):
        return _execute_sync(alias, step.statement, step.params)


def run[T](plan: Generator[Step, Rows, T]) -> T:
    """Drive ``plan`` on the sync face; returns what the plan returns."""
    try:
        step = next(plan)
        while True:
            step = plan.send(execute(step))
    except StopIteration as done:
        return done.value


# -- the async face: the store's own pools ------------------------------------------------------


def _connection_kwargs(alias: str) -> dict[str, Any]:
    params = connections[alias].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    params.update(autocommit=True, prepare_threshold=PREPARE_THRESHOLD if prepares() else None)
    return params


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    # UTC like Django's connections, and the same way: the logins start their sessions in UTC
    # (project.logins.LOGIN_SETTINGS), so this sends nothing unless the server reports another
    # zone. (Through PgBouncer the SET still holds: it is one of the parameters PgBouncer keeps
    # per client and sets on each server connection it lends that client.) Plans are
    # PostgreSQL's choice (a prepared statement's generic plan once it costs no more than
    # planning each run): every statement is written so that its generic plan finds its rows
    # by index (constants as literals, so partial indexes match; batches by key = ANY(ids)),
    # and the claim is planned once per connection, not per batch (planning it cost more than
    # running it).
    if conn.info.parameter_status("TimeZone") != "UTC":
        await conn.execute("SET TIME ZONE 'UTC'")


async def _configure_generic(conn: psycopg.AsyncConnection[Any]) -> None:
    # For the whole session, set once here: a statement that wants its generic plan (the
    # claim) then goes alone, not behind GENERIC_PLAN in its pipeline (about 0.3 ms of a 1.9
    # ms claim of one item here). Sessions of these connections run nothing else.
    await conn.execute("SET plan_cache_mode = force_generic_plan")
    await _configure(conn)


# A pooled connection left unused this long is tested (an empty statement, one round trip)
# before it is lent: the server may have ended it meanwhile (a restart, an outage), and the
# statement that found it so would fail after the outage, as news of a new one. The claims'
# connections, lent at every poll at least (1 s by default), go as they are.
IDLE_CHECK_S = 2.0


async def _check_if_idle(conn: psycopg.AsyncConnection[Any]) -> None:
    if time.monotonic() - getattr(conn, "_workqueue_lent_at", 0.0) > IDLE_CHECK_S:
        await conn.execute("")
    conn._workqueue_lent_at = time.monotonic()  # type: ignore[attr-defined]


TENANT, SYSTEM, GENERIC = "tenant", "system", "system-generic"


class AsyncStore:
    """Small pools on the caller's event loop: the everyday login (tenant steps), the system
    login (system steps), two pools even where both are one login, and the system login's
    connections planned generically (``generic``: system steps whose statement wants its
    generic plan, the claims, while statements are prepared). Each opened on first use, all
    closed by ``aclose``."""

    def __init__(
        self,
        tenant_size: int = 2,
        system_size: int = 3,
        timeout_s: float = 10.0,
        generic_size: int = 2,
    ):
        self.sizes = {TENANT: tenant_size, SYSTEM: system_size, GENERIC: generic_size}
        self.timeout_s = timeout_s
        self._pools: dict[str, AsyncConnectionPool] = {}
        # Whether the system login bypasses row-level security (else: the all-tenants setting).
        self._system_bypasses: bool | None = None

    @property
    def max_connections(self) -> int:
        """The most connections this store opens (what a worker's pool budget must cover)."""
        return sum(self.sizes.values())

    async def _pool(self, role: str) -> AsyncConnectionPool:
        pool = self._pools.get(role)
        if pool is None:
            alias = tenant_alias() if role == TENANT else system_alias()
            kwargs = await asyncio.to_thread(_connection_kwargs, alias)
            if role != TENANT and self._system_bypasses is None:
                self._system_bypasses = await asyncio.to_thread(_closing(bypasses_rls), alias)
            pool = AsyncConnectionPool(
                kwargs=kwargs,
                min_size=1,
                max_size=self.sizes[role],
                timeout=self.timeout_s,
                configure=_configure_generic if role == GENERIC else _configure,
                check=_check_if_idle,
                name=f"workqueue-{role}",
                open=False,
            )
            await pool.open(wait=False)
            self._pools[role] = pool
        return pool

    async def _execute_batches(self, step: TenantBatches) -> Rows:
        statement = step.statement
        pool = await self._pool(TENANT)
        async with pool.connection() as conn:
            cursors = []
            async with conn.transaction(), conn.pipeline():
                for params in step.params:
                    cursor = psycopg.AsyncRawCursor(conn)
                    cursors.append(cursor)
                    bound = statement.bind_native(params)
                    await cursor.execute(statement.native_sql, bound, binary=True)
            names = [col.name for col in cursors[0].description or ()] if cursors else []
            if not names:  # a statement that returns no rows (a plain INSERT)
                return Rows([], [])
            return Rows(names, [row for cursor in cursors for row in await cursor.fetchall()])

    async def execute(self, step: Step) -> Rows:
        """Run one step on the async face."""
        statement = step.statement
        if "native_sql" not in statement.__dict__:
            await asyncio.to_thread(_compile, statement)
        if isinstance(step, TenantBatches):
            return await self._execute_batches(step)
        # A claim's generic plan comes from its connection's session (``_configure_generic``)
        # where statements are prepared; else from GENERIC_PLAN before it (where it is prepared
        # still: a store without that pool).
        plan_setting = statement.generic_plan and prepares()
        if not isinstance(step, System):
            role = TENANT
        elif plan_setting and self.sizes[GENERIC] > 0:
            role, plan_setting = GENERIC, False
        else:
            role = SYSTEM
        pool = await self._pool(role)
        async with pool.connection() as conn:
            cursor = psycopg.AsyncRawCursor(conn)
            bound = statement.bind_native(step.params)
            before: list[tuple[str, dict[str, Any] | None]] = []
            if isinstance(step, System):
                if not self._system_bypasses:
                    before.append((SET_ALL_TENANTS, {"on": "on"}))
                if step.serialize is not None:
                    mutex = {"name": step.serialize}
                    before += [(_MUTEX_ROW, mutex), (_MUTEX_LOCK, mutex)]
            elif not statement.names_tenant:
                before = [(SET_TENANT, {"org_id": str(step.org_id)})]
            if plan_setting:
                before.append((GENERIC_PLAN, None))
            if not before and role != GENERIC:
                await cursor.execute(statement.native_sql, bound, binary=True)
            else:
                # A claim goes in a pipeline even alone (0.15 ms dearer than bare, 0.3 ms cheaper
                # than behind the plan setting here): sent bare, a claim that met a session the
                # server had just ended gave its connection back as closed, and the pool's
                # warning of it came before the claim's failure reached the worker's outage
                # account (tests/runtime/test_worker.py, the outage as two lines).
                # One round trip: the preamble (the tenant setting, or the all-tenants setting
                # and the mutex, and the plan setting) and the statement in one implicit
                # transaction (everything up to the Sync), so the settings, or the lock, end
                # with it.
                # (The pipeline's end sends the one Sync: an explicit sync() before it made the
                # end send a second, an empty round trip.)
                async with conn.pipeline():
                    for query, params in before:
                        await conn.execute(query, params)
                    await cursor.execute(statement.native_sql, bound, binary=True)
            names = [col.name for col in cursor.description or ()]
            return Rows(names, await cursor.fetchall() if names else [])

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()


def _closing[T](fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` on a worker thread, giving back the Django connections it opened there."""

    def call(*args: Any) -> T:
        try:
            return fn(*args)
        finally:
            connections.close_all()

    return call


def _compile(statement: Statement) -> None:
    """Build a statement's SQL off the event loop (a locking queryset compiles on Django's
    connection), then give back the connection this thread opened."""
    try:
        statement.native_sql  # noqa: B018
    finally:
        connections.close_all()


_STORES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncStore] = (
    weakref.WeakKeyDictionary()
)


def async_store() -> AsyncStore:
    """The running event loop's store (made on first use)."""
    loop = asyncio.get_running_loop()
    store = _STORES.get(loop)
    if store is None:
        store = _STORES[loop] = AsyncStore()
    return store


def use_async_store(store: AsyncStore) -> None:
    """Make ``store`` the running loop's store (a worker sizes its own)."""
    _STORES[asyncio.get_running_loop()] = store


async def aclose_async_store() -> None:
    """Close the running loop's store, if it has one."""
    store = _STORES.pop(asyncio.get_running_loop(), None)
    if store is not None:
        await store.aclose()


async def arun[T](plan: Generator[Step, Rows, T]) -> T:
    """Drive ``plan`` on the async face; returns what the plan returns."""
    store = async_store()
    try:
        step = next(plan)
        while True:
            step = plan.send(await store.execute(step))
    except StopIteration as done:
        return done.value
