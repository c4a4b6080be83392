"""The pooler-safe mode on PostgreSQL itself (no pooler needed): with ``WORKQUEUE["POOLER"] =
"transaction"`` nothing is prepared on either face and the claim's plan setting is not sent;
the logins carry their session settings; the system check says when one does not.
(tests/runtime/test_pgbouncer.py runs all of it through a real PgBouncer.)"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from django.db import connections

from tenancy.contexts import OpContext
from tests.helpers import queue_settings, statements
from workqueue import api, checks
from workqueue.claim import aclaim, claim
from workqueue.settle import complete
from wqcore import store
from wqcore.conf import LOGIN_SETTINGS
from wqcore.store import aclose_async_store

pytestmark = pytest.mark.usefixtures("committed")


def _prepared(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        return cursor.fetchone()[0]


def _rounds(ctx: OpContext, rctx: Any) -> None:
    for n in range(4):  # past the prepare threshold
        api.enqueue(ctx, "NOOP", {"n": n})
        api.enqueue_many(ctx, [api.NewItem("NOOP", {"n": n})])
        for item_ctx, item in claim(rctx, "default", ["NOOP"], "w", 30, 2):
            complete(item_ctx, item)


async def _arounds(ctx: OpContext, rctx: Any) -> tuple[int, list[str]]:
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def spy(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return await execute(self, query, *args, **kwargs)

    psycopg.AsyncConnection.execute = spy  # type: ignore[method-assign]
    try:
        for n in range(4):
            await api.aenqueue(ctx, "NOOP", {"n": n})
            for item_ctx, item in await aclaim(rctx, "default", ["NOOP"], "w", 30, 2):
                await complete.aio(item_ctx, item)
        prepared = 0
        for alias in (store.TENANT, store.SYSTEM):
            pool = await store.async_store()._pool(alias)
            async with pool.connection() as conn:
                cursor = await conn.execute("SELECT count(*) FROM pg_prepared_statements")
                prepared += (await cursor.fetchone())[0]
        return prepared, sent
    finally:
        psycopg.AsyncConnection.execute = execute  # type: ignore[method-assign]
        await aclose_async_store()


@pytest.mark.parametrize("pooler", ["none", "transaction"])
def test_behind_a_transaction_pooler_nothing_is_prepared_on_either_face(
    ctx: OpContext, worker_rctx, pooler: str
) -> None:
    """Through PgBouncer (1.18) a statement prepared on one server connection is missing on
    the next; so with DATABASE_POOLER=transaction the store prepares none, and the claim's
    plan setting (whose gain is a plan kept for the next run) is not sent either."""
    connections.close_all()  # sessions that prepared before this test
    with queue_settings(POOLER=pooler), statements("system") as sent:
        _rounds(ctx, worker_rctx)
        sync_prepared = _prepared("default") + _prepared("system")
        async_prepared, async_sent = asyncio.run(_arounds(ctx, worker_rctx))
    plan_settings = [s for s in sent + async_sent if "force_generic_plan" in s]
    if pooler == "transaction":
        assert (sync_prepared, async_prepared, plan_settings) == (0, 0, [])
    else:  # what the setting changes: the default prepares, and plans the claim once
        assert sync_prepared > 0 and async_prepared > 0 and plan_settings


def test_the_logins_carry_their_session_settings() -> None:
    """jit = off and UTC are set on the two logins (ALTER ROLE ... SET, by create_logins), so
    the server applies them at every login, whatever the connection sends."""
    for alias in ("default", "system"):
        user = connections[alias].settings_dict["USER"]
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole"
                " WHERE r.rolname = %s AND s.setdatabase = 0",
                [user],
            )
            (config,) = cursor.fetchone()
        on_login = dict(setting.split("=", 1) for setting in config)
        on_login = {name.lower(): value for name, value in on_login.items()}
        assert on_login | dict(LOGIN_SETTINGS) == on_login, config
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT current_setting('jit'), current_setting('TimeZone')")
            assert cursor.fetchone() == ("off", "UTC"), alias


def test_the_system_check_warns_of_a_login_that_compiles_just_in_time() -> None:
    assert checks.database_setup() == []
    with connections["system"].cursor() as cursor:
        cursor.execute("SET jit = on")  # as a login made by hand starts
    try:
        [warning] = checks.database_setup()
    finally:
        with connections["system"].cursor() as cursor:
            cursor.execute("RESET jit")
    assert warning.id == "workqueue.W001"
    assert "jit = on" in warning.msg and "manage.py set_login_settings" in warning.msg
    assert "workqueue_system" in warning.msg and "\n" not in warning.msg


def test_set_login_settings_puts_them_back_on_each_login_as_itself() -> None:
    """A login without them (made by hand, as a site's own is) warns at the check; the command
    sets them, each login for itself (no owner needed), and the check is quiet again."""
    from io import StringIO

    from django.core.management import call_command

    for alias in ("default", "system"):
        with connections[alias].cursor() as cursor:
            cursor.execute("ALTER ROLE CURRENT_USER RESET jit")
        connections[alias].close()  # the next session starts with the login's defaults
    try:
        warnings = checks.database_setup()
        assert [w.id for w in warnings] == ["workqueue.W001"] * 2
        assert all("manage.py set_login_settings" in w.msg for w in warnings)
    finally:
        out = StringIO()
        call_command("set_login_settings", stdout=out)
        for alias in ("default", "system"):
            connections[alias].close()
    app, system = (connections[a].settings_dict["USER"] for a in ("default", "system"))
    assert out.getvalue().splitlines() == [
        f"login {app} (default): jit = off, timezone = UTC",
        f"login {system} (system): jit = off, timezone = UTC",
    ]
    assert checks.database_setup() == []
