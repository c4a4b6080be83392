"""The one store: the statement the worker runs, what it costs, and the statements' contracts."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import pytest
from django.db import DataError, connections
from psycopg import pq, sql

from tenancy.contexts import OpContext
from workqueue import SQL_DIR, api, claim, claim_statements
from wqcore import async_face, store, sync_face
from wqcore.statements import NoParams, Statement
from wqcore.store import System, aclose_async_store, execute

pytestmark = pytest.mark.usefixtures("committed")


@pytest.mark.parametrize("limited", [False, True], ids=["without rate limits", "with them"])
def test_the_claims_lock_is_the_compiled_select_for_update_skip_locked_queryset(
    limited: bool,
) -> None:
    locking = claim_statements._claim_locking(limited)
    statement = claim_statements.CLAIM_LIMITED if limited else claim.CLAIM
    assert "FOR UPDATE SKIP LOCKED" in locking.sql
    assert 'FROM "workqueue_workitem"' in locking.sql
    assert locking.sql in statement.sql  # embedded as is in the one claim statement
    assert re.search(r"UPDATE ONLY workqueue_workitem AS w\s+SET status = 'claimed'", statement.sql)


def test_a_claim_batch_on_the_workers_async_path_is_one_round_trip(
    ctx: OpContext, worker_rctx, tmp_path: Path, monkeypatch
) -> None:
    for _ in range(21):
        api.enqueue(ctx, "NOOP", {})
    handles = []
    configure = async_face._configure

    async def configure_then_trace(conn: psycopg.AsyncConnection) -> None:  # type: ignore[type-arg]
        await configure(conn)  # set-up statements are not part of the claim
        handles.append((tmp_path / f"trace-{len(handles)}.txt").open("w"))
        conn.pgconn.trace(handles[-1].fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    monkeypatch.setattr(async_face, "_configure", configure_then_trace)
    # Whether any cap or rate limit is in effect is read at most every CAPS_CACHE_S and
    # RATE_LIMITS_CACHE_S, in statements of their own: read them now and keep the readings, so
    # the traced claim is one like all the others in between.
    claim.claim(worker_rctx, "default", ["NOOP"], "w0", 30, 1)
    monkeypatch.setattr(claim, "CAPS_CACHE_S", float("inf"))
    monkeypatch.setattr(claim, "RATE_LIMITS_CACHE_S", float("inf"))

    async def claim_once() -> int:
        try:
            return len(await claim.aclaim(worker_rctx, "default", ["NOOP"], "w1", 30, 20))
        finally:
            await aclose_async_store()

    assert asyncio.run(claim_once()) == 20
    for handle in handles:
        handle.close()
    text = "".join(Path(h.name).read_text() for h in handles)
    # Each message the client sent starts a line "F<tab>length<tab>Type" (the SQL of a Parse
    # runs on over several lines).
    messages = re.findall(r"^F\t\d+\t(\w+)", text, re.M)
    assert messages.count("Sync") == 1, messages  # the whole batch: one exchange
    assert messages.count("Execute") == 1  # the claim alone: its session plans it generically
    # The statement sent is the claim with the compiled select_for_update(skip_locked=True).
    assert "FOR UPDATE SKIP LOCKED" in text and "SET status = 'claimed'" in text


def test_the_claims_run_on_sessions_that_plan_them_generically_and_nothing_else_does(
    ctx: OpContext, worker_rctx
) -> None:
    """The claim's generic plan (planned once per connection, not per batch) comes from its
    connections' session setting, so it runs without a preamble; the system login's other
    statements keep PostgreSQL's choice, and a store without a claims' pool sends the setting
    before the claim instead."""
    for _ in range(4):
        api.enqueue(ctx, "NOOP", {})

    async def modes_after_claims() -> tuple[int, dict[str, str]]:
        try:
            claimed = await claim.aclaim(worker_rctx, "default", ["NOOP"], "w1", 30, 2)
            claimed += await claim.aclaim(worker_rctx, "default", ["NOOP"], "w1", 30, 1, woken=True)
            modes = {}
            for role in (store.GENERIC, store.SYSTEM):
                pool = await store.async_store()._pool(role)
                async with pool.connection() as conn:
                    row = await (await conn.execute("SHOW plan_cache_mode")).fetchone()
                    modes[role] = row[0] if row else ""
            return len(claimed), modes
        finally:
            await aclose_async_store()

    assert asyncio.run(modes_after_claims()) == (
        3,
        {store.GENERIC: "force_generic_plan", store.SYSTEM: "auto"},
    )

    async def claim_without_a_claims_pool() -> int:
        store.use_async_store(store.AsyncStore(generic_size=0))
        try:
            return len(await claim.aclaim(worker_rctx, "default", ["NOOP"], "w1", 30, 5))
        finally:
            await aclose_async_store()

    assert asyncio.run(claim_without_a_claims_pool()) == 1


def test_a_pooled_connection_the_server_ended_while_unused_is_replaced_before_it_is_lent(
    monkeypatch,
) -> None:
    """A connection left unused past IDLE_CHECK_S is tested before it is lent (an empty
    statement): one the server ended meanwhile (a restart, an outage) is replaced, and the
    statement runs on a new one instead of failing."""
    monkeypatch.setattr(async_face, "IDLE_CHECK_S", 0.0)

    def end_session(pid: int) -> None:
        try:
            with connections["admin"].cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        finally:
            connections["admin"].close()

    async def ended_then_used() -> tuple[int, int, list[Any]]:
        try:
            pool = await store.async_store()._pool(store.SYSTEM)
            async with pool.connection() as conn:
                ended = conn.info.backend_pid
            await asyncio.to_thread(end_session, ended)
            rows = await store.async_store().execute(System(claim.CAPS_IN_EFFECT, NoParams()))
            async with pool.connection() as conn:
                now = conn.info.backend_pid
            return ended, now, rows.rows
        finally:
            await aclose_async_store()

    ended, now, rows = asyncio.run(ended_then_used())
    assert ended != now
    assert len(rows) == 1


def test_every_statement_names_exactly_its_parameters() -> None:
    """Each named statement's placeholders are its NamedTuple's fields (Statement.sql checks),
    and every .sql file of the store is a statement someone declared."""
    import importlib
    import pkgutil

    import workqueue
    from outbox import emit, relay
    from workers import gauges, liveness, liveness_lock
    from workers.sweep import rescue

    # Every module of the queue (its statements live where their transitions do).
    modules = [
        importlib.import_module(found.name)
        for found in pkgutil.walk_packages(workqueue.__path__, "workqueue.")
        if ".migrations" not in found.name and ".management" not in found.name
    ]
    declared: list[Statement] = [
        value
        for module in (*modules, emit, relay, gauges, liveness, liveness_lock, rescue)
        for value in vars(module).values()
        if isinstance(value, Statement)
    ]
    for statement in declared:
        assert statement.sql  # raises TypeError when placeholders and parameters differ
        first = statement.sql.splitlines()[0]
        assert first.startswith(f"-- {statement.name}: "), f"{statement.name}: a line of intent"
    # And those made at run time, one per registered table (the erase's: workqueue/erase.py).
    from wqcore.statements import statements

    declared += [s for s in statements().values() if s not in declared]
    names = {s.name for s in declared if s.directory == SQL_DIR}
    files = {p.stem for p in SQL_DIR.glob("*.sql")} - {"grants"}
    assert files == names


def test_a_statement_refuses_parameters_of_another_shape() -> None:
    from workqueue import settle

    with pytest.raises(TypeError, match="takes CompleteParams"):
        execute(System(settle.COMPLETE, settle.ExtendLeaseParams(1, 2, 3)))  # type: ignore[arg-type]


def test_no_login_compiles_statements_just_in_time() -> None:
    """JIT compiled the fair claim on every run once its estimates passed jit_above_cost (at a
    million waiting items), costing more than the claim's own work. The everyday and system
    logins start every session with it off (set on the logins by create_logins, not sent at
    connect: a pooler refuses startup options), the store's async pools included."""

    async def async_setting() -> str:
        try:
            pool = await store.async_store()._pool(store.TENANT)
            async with pool.connection() as conn:
                return (await (await conn.execute("SHOW jit")).fetchone())[0]
        finally:
            await aclose_async_store()

    for alias in ("default", "system"):
        with connections[alias].cursor() as cursor:
            cursor.execute("SHOW jit")
            assert cursor.fetchone()[0] == "off", alias
        assert "options" not in connections[alias].settings_dict["OPTIONS"], alias
    assert asyncio.run(async_setting()) == "off"


def test_lists_of_uuids_go_to_the_server_as_binary_uuid_arrays() -> None:
    """Issue 22: a statement's ``list[uuid.UUID]`` parameters are sent as binary ``uuid[]``
    (wqcore.arrays), which the server reads as the same values the text form gave: order,
    repeats, None, an id given as text; a malformed one is the server's own error."""
    import uuid

    from workqueue import settle
    from workqueue.fence import Fences
    from wqcore.arrays import UUIDArray

    assert settle.COMPLETE_MANY.uuid_lists == (0, 1, 2)  # org_ids, ids, tokens
    a, b = uuid.uuid4(), uuid.uuid4()
    bound = settle.COMPLETE_MANY.bind_native(
        settle.CompleteManyParams(*Fences([a], [b], [a]), None)
    )
    assert all(type(value) is UUIDArray for value in bound[:3]) and bound[3] is None

    cases = [
        [a, b, a],
        [],
        [a, None, b],
        [a, str(b)],
        [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)],
    ]
    with connections["default"].cursor() as wrapper:
        raw = psycopg.RawCursor(wrapper.connection)
        for case in cases:
            raw.execute("SELECT $1::uuid[]", (UUIDArray(case),))
            expected = [uuid.UUID(v) if isinstance(v, str) else v for v in case]
            assert raw.fetchone()[0] == expected, case
        raw.execute(
            "SELECT cardinality($1::uuid[]), $1::uuid[] = $2::uuid[]", (UUIDArray([a, b]), [a, b])
        )
        assert raw.fetchone() == (2, True)
    with pytest.raises(psycopg.DataError, match="uuid"):
        from wqcore.arrays import UUIDArrayBinaryDumper

        UUIDArrayBinaryDumper(UUIDArray).dump(UUIDArray(["not a uuid"]))


def test_a_bulk_enqueues_columns_go_to_the_server_as_binary_arrays_of_the_same_values() -> None:
    """Issue 22: a bulk enqueue sends its rows as one binary array per column (wqcore.arrays):
    the server reads each as the values the list held, in order, with NULLs, repeats (a column
    of one value is written once and repeated), text of every plane, the types' extremes, and
    moments in any time zone, far past and future; a naive moment is refused before sending."""
    from datetime import UTC, datetime, timedelta, timezone

    from wqcore.arrays import IntArray, SmallIntArray, TextArray, TimestamptzArray

    paris = timezone(timedelta(hours=1))
    cases: list[tuple[type[list[Any]], str, list[Any]]] = [
        (TextArray, "text[]", ["a", "", None, "ünïcødé 🎉", "a", 'quo"te\\', "x" * 10_000]),
        (TextArray, "text[]", ["same"] * 5),
        (TextArray, "text[]", [None] * 3),
        (TextArray, "text[]", []),
        (SmallIntArray, "smallint[]", [0, -32768, 32767, None, 7]),
        (SmallIntArray, "smallint[]", [3] * 4),
        (IntArray, "integer[]", [0, -(2**31), 2**31 - 1, None]),
        (IntArray, "integer[]", [5] * 1000),
        (
            TimestamptzArray,
            "timestamptz[]",
            [
                datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=UTC),
                datetime(2026, 12, 3, 11, 0, 0, 123456, tzinfo=paris),
                None,
                datetime(1, 1, 1, tzinfo=UTC),
                datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            ],
        ),
    ]
    with connections["default"].cursor() as wrapper:
        raw = psycopg.RawCursor(wrapper.connection)
        for cls, sql_type, values in cases:
            raw.execute(f"SELECT $1::{sql_type}, $2::{sql_type} = $1", (cls(values), values))
            read, same_as_text = raw.fetchone()
            assert read == values, (cls, values)
            assert same_as_text is True, (cls, values)
    with pytest.raises(psycopg.DataError, match="time zone"):
        with connections["default"].cursor() as wrapper:
            psycopg.RawCursor(wrapper.connection).execute(
                "SELECT $1::timestamptz[]", (TimestamptzArray([datetime(2026, 1, 1)]),)
            )


class _RowsParams(NamedTuple):
    n: int


def test_the_sync_face_reuses_one_cursor_per_connection_and_lets_a_large_result_go(
    tmp_path: Path,
) -> None:
    """Single statements on a connection share one raw cursor (making one is a large share of
    a single enqueue's own time); a failed statement leaves it usable, a result over
    ``_KEPT_ROWS_MAX`` rows is let go with it, and a new connection gets a new one."""
    (tmp_path / "rows.sql").write_text(
        "-- rows: n numbered rows\nSELECT g FROM generate_series(1, %(n)s::integer) AS g\n"
    )
    (tmp_path / "fails.sql").write_text("-- fails: a division by zero\nSELECT 1 / %(n)s::integer\n")
    rows = Statement("rows", _RowsParams, tmp_path)
    fails = Statement("fails", _RowsParams, tmp_path)
    connection = connections["default"]
    connection.close()

    def kept() -> Any:
        return sync_face._KEPT.get(connection)

    assert sync_face._execute_sync("default", rows, _RowsParams(3)).rows == [(1,), (2,), (3,)]
    first = kept()
    assert sync_face._execute_sync("default", rows, _RowsParams(2)).rows == [(1,), (2,)]
    assert kept() is first

    with pytest.raises(DataError, match="division by zero"):
        sync_face._execute_sync("default", fails, _RowsParams(0))
    assert sync_face._execute_sync("default", rows, _RowsParams(1)).rows == [(1,)]
    assert kept() is first

    many = sync_face._KEPT_ROWS_MAX + 1
    assert len(sync_face._execute_sync("default", rows, _RowsParams(many)).rows) == many
    assert kept() is None and first.closed
    sync_face._execute_sync("default", rows, _RowsParams(1))
    assert kept() is not first

    again = kept()
    connection.close()
    assert sync_face._execute_sync("default", rows, _RowsParams(1)).rows == [(1,)]
    assert kept() is not again
    assert kept().connection is connection.connection
    # Nothing is hung on Django's connection object: the store keeps its own.
    assert not hasattr(connection, "_workqueue_cursor")


def test_the_batch_completion_and_renewal_find_their_rows_by_key_however_many_are_claimed(
    ctx: OpContext, worker_rctx
) -> None:
    """Issue 22: with thousands of items claimed, completing or renewing a batch reads its rows
    by the primary key, not the claimed rows' index end to end (which the planner chose while
    the status test sat beside the id: every batch then cost a scan of every claimed row), on
    the plan it makes for any values (generic) as for these ones."""
    from workqueue import settle
    from workqueue.fence import Fences

    api.enqueue_many(ctx, [api.NewItem("NOOP", {}) for _ in range(3000)])
    # Statistics read while none was claimed (as autovacuum last saw a quiet queue), then a
    # busy moment: the planner believes few rows claimed.
    with connections["admin"].cursor() as cursor:
        cursor.execute("ANALYZE workqueue_workitem")
    claimed = claim.claim(worker_rctx, "default", ["NOOP"], "w1", 300, 3000)
    assert len(claimed) == 3000
    batch = [item for _, item in claimed[:10]]
    fences = Fences(
        [i.org_id for i in batch], [i.id for i in batch], [i.claim_token for i in batch]
    )
    connections["system"].ensure_connection()
    conn = connections["system"].connection  # the system login's own session, as the worker's
    for statement, params in (
        (settle.COMPLETE_MANY, settle.CompleteManyParams(*fences, None)),
        (settle.COMPLETE_MANY, settle.CompleteManyParams(*fences, ['{"r":1}'] * 10)),  # type: ignore[arg-type]
        (settle.EXTEND_LEASES, settle.ExtendLeasesParams(*fences, 30.0)),
    ):
        for mode in ("force_generic_plan", "force_custom_plan"):
            with conn.transaction():
                conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                conn.execute(f"PREPARE probe AS {statement.native_sql}")
                literals = sql.SQL(", ").join(sql.Literal(v) for v in params)
                plan = "\n".join(
                    row[0]
                    for row in conn.execute(sql.SQL("EXPLAIN EXECUTE probe({})").format(literals))
                )
                conn.execute("DEALLOCATE probe")
            assert "workqueue_workitem_pkey" in plan, (statement.name, mode, plan)
            assert "workitem_stale_idx" not in plan, (statement.name, mode, plan)


def test_statements_that_first_need_a_pool_at_once_share_one() -> None:
    """The first uses of a pool on a loop, at once (a worker's items failing together after an
    outage), make one pool: a second, overwritten, would hold its connection and tasks until
    collected ("Task was destroyed but it is pending!")."""

    async def first_uses() -> set[int]:
        fresh = store.AsyncStore()
        try:
            pools = await asyncio.gather(*(fresh._pool(store.TENANT) for _ in range(5)))
            return {id(pool) for pool in pools}
        finally:
            await fresh.aclose()

    assert len(asyncio.run(first_uses())) == 1
