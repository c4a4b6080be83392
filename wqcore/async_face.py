"""The async face: plans run on the store's own psycopg async pools, on the caller's event loop.

Each statement commits on its own (autocommit): this face joins no transaction of the caller's.
Statements are prepared on the server after a few runs (``plans.prepares``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import connections
from psycopg_pool import AsyncConnectionPool

from wqcore.conf import libpq_params, system_alias, tenant_alias
from wqcore.jsonb import ADAPTERS
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
    prepares,
)
from wqcore.scope import SET_ALL_TENANTS, bypasses_rls, naming_locally, tenant_naming
from wqcore.statements import GENERIC_PLAN, Statement


def connection_kwargs(alias: str) -> dict[str, Any]:
    """psycopg's parameters for a connection of the store's own on ``alias``: autocommit,
    preparing statements after a few runs unless ``prepares()`` says not to, and reading
    jsonb by ``wqcore.jsonb``; the keepalives and user timeout in effect unless the alias's
    OPTIONS set their own."""
    params = libpq_params(alias)
    params.update(
        autocommit=True,
        prepare_threshold=PREPARE_THRESHOLD if prepares() else None,
        context=ADAPTERS,
    )
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
        await conn.execute(UTC_SESSION)


def preamble(
    step: Step, system_bypasses: bool, plan_setting: bool
) -> list[tuple[str, dict[str, Any] | None]]:
    """What goes before ``step``'s statement in its implicit transaction: the tenant setting,
    or the all-tenants setting (unless the system login bypasses row-level security) and the
    mutex, and the plan setting."""
    before: list[tuple[str, dict[str, Any] | None]] = []
    if isinstance(step, System):
        if not system_bypasses:
            before.append((SET_ALL_TENANTS, {"on": "on"}))
        if step.serialize is not None:
            mutex = {"name": step.serialize}
            before += [(MUTEX_ROW, mutex), (MUTEX_LOCK, mutex)]
    elif not step.statement.names_tenant or naming_locally():
        # A statement's own set_config never reaches Citus's workers: SET LOCAL goes first.
        before = [tenant_naming(step.org_id)]
    if plan_setting:
        before.append((GENERIC_PLAN, None))
    return before


# For the whole session of a connection that runs claims alone, set once: a statement that
# wants its generic plan (the claim) then goes alone, not behind GENERIC_PLAN in its pipeline,
# whose extra statement is a sizeable share of a small claim.
GENERIC_SESSION = "SET plan_cache_mode = force_generic_plan"
# Sent only where the server reports another zone (see ``_configure``).
UTC_SESSION = "SET TIME ZONE 'UTC'"


async def _configure_generic(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute(GENERIC_SESSION)
    await _configure(conn)


# A pooled connection left unused this long is tested (an empty statement, one round trip)
# before it is lent: the server may have ended it meanwhile (a restart, an outage), and the
# statement that found it so would fail after the outage, as news of a new one. The claims'
# connections, lent at every poll at least (1 s by default), go as they are.
IDLE_CHECK_S = 2.0

# When each pooled connection was last lent (by connection; an entry goes with its connection).
_LENT_AT: weakref.WeakKeyDictionary[psycopg.AsyncConnection[Any], float] = (
    weakref.WeakKeyDictionary()
)


async def _check_if_idle(conn: psycopg.AsyncConnection[Any]) -> None:
    if time.monotonic() - _LENT_AT.get(conn, 0.0) > IDLE_CHECK_S:
        await conn.execute("")
    _LENT_AT[conn] = time.monotonic()


TENANT, SYSTEM, GENERIC = "tenant", "system", "system-generic"

# A pool's connections beyond its first go back once one sat unused this long (psycopg's
# default, ten minutes, kept a burst's connections open on an idle worker all that time).
POOL_MAX_IDLE_S = 60.0


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
        # Held while a pool is made: two first uses at once would each make one, and the one
        # overwritten would hold its connection and tasks until collected.
        self._making = asyncio.Lock()
        # Whether the system login bypasses row-level security (else: the all-tenants setting).
        self._system_bypasses: bool | None = None

    async def _pool(self, role: str) -> AsyncConnectionPool:
        pool = self._pools.get(role)
        if pool is not None:
            return pool
        async with self._making:
            return self._pools.get(role) or await self._make_pool(role)

    async def _make_pool(self, role: str) -> AsyncConnectionPool:
        alias = tenant_alias() if role == TENANT else system_alias()
        kwargs = await asyncio.to_thread(connection_kwargs, alias)
        if role != TENANT and self._system_bypasses is None:
            self._system_bypasses = await asyncio.to_thread(_closing(bypasses_rls), alias)
        pool = AsyncConnectionPool(
            kwargs=kwargs,
            min_size=1,
            max_size=self.sizes[role],
            max_idle=POOL_MAX_IDLE_S,
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
                if naming_locally():
                    await conn.execute(*tenant_naming(step.org_id))
                for params in step.params:
                    cursor = psycopg.AsyncRawCursor(conn)
                    cursors.append(cursor)
                    bound = statement.bind_native(params)
                    await cursor.execute(statement.native_sql, bound, binary=True)
            names = _column_names(cursors[0]) if cursors else []
            if not names:  # a statement that returns no rows (a plain INSERT)
                return Rows([], [])
            return Rows(names, [row for cursor in cursors for row in await cursor.fetchall()])

    async def _execute_chain(self, step: TenantChain) -> Rows:
        pool = await self._pool(TENANT)
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(*tenant_naming(step.org_id))
            first = await _run(conn, step.statement, step.params)
            for statement, params in step.then(first):
                if "native_sql" not in statement.__dict__:
                    await asyncio.to_thread(_compile, statement)
                await _run(conn, statement, params)
        return first

    def _role(self, step: Step) -> tuple[str, bool]:
        """The pool ``step`` runs on, and whether ``GENERIC_PLAN`` goes before it. A claim's
        generic plan comes from its connection's session (``_configure_generic``) where
        statements are prepared; else from GENERIC_PLAN before it (where it is prepared still:
        a store without that pool)."""
        plan_setting = step.statement.generic_plan and prepares()
        if not isinstance(step, System):
            return TENANT, plan_setting
        if plan_setting and self.sizes[GENERIC] > 0:
            return GENERIC, False
        return SYSTEM, plan_setting

    async def execute(self, step: Step) -> Rows:
        """Run one step on the async face."""
        statement = step.statement
        if "native_sql" not in statement.__dict__:
            await asyncio.to_thread(_compile, statement)
        if isinstance(step, TenantBatches):
            return await self._execute_batches(step)
        if isinstance(step, TenantChain):
            return await self._execute_chain(step)
        role, plan_setting = self._role(step)
        pool = await self._pool(role)
        async with pool.connection() as conn:
            cursor = psycopg.AsyncRawCursor(conn)
            bound = statement.bind_native(step.params)
            before = preamble(step, bool(self._system_bypasses), plan_setting)
            if not before:
                await cursor.execute(statement.native_sql, bound, binary=True)
            else:
                # One round trip: the preamble and the statement in one implicit transaction
                # (everything up to the Sync), so the settings, or the lock, end with it.
                # (The pipeline's end sends the one Sync: an explicit sync() before it made the
                # end send a second, an empty round trip.)
                async with conn.pipeline():
                    # Citus passes a SET LOCAL on to its workers only inside an explicit
                    # transaction, not the pipeline's implicit one.
                    async with _explicit(conn, isinstance(step, Tenant) and naming_locally()):
                        for query, params in before:
                            await conn.execute(query, params)
                        await cursor.execute(statement.native_sql, bound, binary=True)
            names = _column_names(cursor)
            return Rows(names, await cursor.fetchall() if names else [])

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()


async def _run(conn: psycopg.AsyncConnection[Any], statement: Statement, params: Any) -> Rows:
    """One statement on ``conn``, in the caller's transaction; its rows."""
    cursor = psycopg.AsyncRawCursor(conn)
    await cursor.execute(statement.native_sql, statement.bind_native(params), binary=True)
    names = _column_names(cursor)
    return Rows(names, await cursor.fetchall() if names else [])


def _explicit(
    conn: psycopg.AsyncConnection[Any], wanted: bool
) -> contextlib.AbstractAsyncContextManager[Any]:
    return conn.transaction() if wanted else contextlib.nullcontext()


def _column_names(cursor: psycopg.AsyncRawCursor[Any]) -> list[str]:
    """The names of the result's columns, read off the result itself: ``cursor.description``
    makes a Column (its type looked up) for each, a claim's 33 on the path to a handler."""
    result = cursor.pgresult
    if result is None:
        return []
    encoding = cursor.connection.info.encoding
    return [(result.fname(i) or b"").decode(encoding) for i in range(result.nfields)]


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


async def arun[T](plan: Plan[T]) -> T:
    """Drive ``plan`` on the async face; returns what the plan returns. A step's error is
    raised in the plan, where it yielded the step."""
    store = async_store()
    try:
        step = next(plan)
        while True:
            try:
                rows = await store.execute(step)
            except BaseException as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(rows)
    except StopIteration as done:
        result: T = done.value  # what the plan returned
        return result
