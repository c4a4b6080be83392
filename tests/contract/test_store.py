"""The one store: the statement the worker runs, what it costs, and the statements' contracts."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import psycopg
import pytest
from django.db import connections
from psycopg import pq

from tenancy.contexts import OpContext
from workqueue import SQL_DIR, api, claim
from wqcore import store
from wqcore.statements import Statement
from wqcore.store import System, aclose_async_store, execute

pytestmark = pytest.mark.usefixtures("committed")


def test_the_claims_lock_is_the_compiled_select_for_update_skip_locked_queryset() -> None:
    locking = claim._claim_locking()
    assert "FOR UPDATE SKIP LOCKED" in locking.sql
    assert 'FROM "workqueue_workitem"' in locking.sql
    assert locking.sql in claim.CLAIM.sql  # embedded as is in the one claim statement
    assert re.search(r"UPDATE workqueue_workitem AS w\s+SET status = 'claimed'", claim.CLAIM.sql)


def test_a_claim_batch_on_the_workers_async_path_is_one_round_trip(
    ctx: OpContext, worker_rctx, tmp_path: Path, monkeypatch
) -> None:
    for _ in range(21):
        api.enqueue(ctx, "NOOP", {})
    handles = []
    configure = store._configure

    async def configure_then_trace(conn: psycopg.AsyncConnection) -> None:  # type: ignore[type-arg]
        await configure(conn)  # set-up statements are not part of the claim
        handles.append((tmp_path / f"trace-{len(handles)}.txt").open("w"))
        conn.pgconn.trace(handles[-1].fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    monkeypatch.setattr(store, "_configure", configure_then_trace)
    # Whether any cap is in effect is read at most every CAPS_CACHE_S, in a statement of its
    # own: read it now, so the traced claim is one like all the others in between.
    api.claim(worker_rctx, "default", ["NOOP"], "w0", 30, 1)

    async def claim_once() -> int:
        try:
            return len(await api.aclaim(worker_rctx, "default", ["NOOP"], "w1", 30, 20))
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
    # the plan setting (GENERIC_PLAN), then the claim
    assert messages.count("Execute") == 2
    assert "force_generic_plan" in text
    # The statement sent is the claim with the compiled select_for_update(skip_locked=True).
    assert "FOR UPDATE SKIP LOCKED" in text and "SET status = 'claimed'" in text


def test_every_statement_names_exactly_its_parameters() -> None:
    """Each named statement's placeholders are its NamedTuple's fields (Statement.sql checks),
    and every .sql file of the store is a statement someone declared."""
    from outbox import emit, relay
    from workers import gauges, liveness
    from workqueue import (
        cancel,
        enqueue,
        figures,
        idempotency,
        maintenance,
        pauses,
        settle,
        triage,
    )

    modules = (claim, enqueue, settle, maintenance, triage, idempotency, figures, cancel, pauses)
    declared: list[Statement] = [
        value
        for module in (*modules, emit, relay, gauges, liveness)
        for value in vars(module).values()
        if isinstance(value, Statement)
    ]
    for statement in declared:
        assert statement.sql  # raises TypeError when placeholders and parameters differ
        first = statement.sql.splitlines()[0]
        assert first.startswith(f"-- {statement.name}: "), f"{statement.name}: a line of intent"
    names = {s.name for s in declared if s.directory == SQL_DIR}
    files = {p.stem for p in SQL_DIR.glob("*.sql")} - {"grants"}
    assert files == names


def test_a_statement_refuses_parameters_of_another_shape() -> None:
    from workqueue import settle

    with pytest.raises(TypeError, match="takes FenceParams"):
        execute(System(settle.COMPLETE, settle.ExtendLeaseParams(1, 2, 3)))  # type: ignore[arg-type]


def test_no_login_compiles_statements_just_in_time() -> None:
    """JIT compiled the fair claim on every run once its estimates passed jit_above_cost (a
    million waiting items): 30 ms of a 31 ms claim. The everyday and system logins start
    every session with it off (set on the logins by create_logins, not sent at connect: a
    pooler refuses startup options), the store's async pools included."""

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
