"""Every connection the product opens carries libpq's keepalives and user timeout
(``wqcore.conf.connection_options``): Django's on each alias (the sweeper's is the system
alias's), the store's own, the workers' liveness session, LISTEN connection and the sweep's
mutex. Read from the real connections' own parameters (libpq's, as it connected)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connections
from django.test import override_settings

from workers import listen
from workers.liveness_lock import TAKE_LIVENESS_LOCK, TakeParams, new_key, session_params
from workers.sweep.sweeper import SweepLock
from wqcore.async_face import connection_kwargs
from wqcore.conf import CONNECTION_OPTIONS, server_socket_settings

pytestmark = pytest.mark.usefixtures("committed")

WANTED = {k: str(v) for k, v in CONNECTION_OPTIONS.items()}


def _carried(info: psycopg.ConnectionInfo) -> dict[str, str]:
    parameters = info.get_parameters()
    return {k: parameters.get(k, "") for k in WANTED}


def _opened(params: dict[str, Any]) -> dict[str, str]:
    with psycopg.connect(**{**params, "autocommit": True}) as conn:
        return _carried(conn.info)


def test_every_connection_the_product_opens_has_keepalives_and_a_user_timeout() -> None:
    for alias in ("default", "system", "admin"):
        connections[alias].ensure_connection()
        assert _carried(connections[alias].connection.info) == WANTED, alias
    assert _opened(connection_kwargs("system")) == WANTED  # the store's own
    assert _opened(session_params()) == WANTED  # the liveness session
    listening = listen.connection_kwargs()
    assert listening is not None
    assert _opened(listening) == WANTED  # the workers' LISTEN
    lock = SweepLock()
    try:
        assert lock.acquire(timeout_s=5)
        assert _carried(lock._connection().info) == WANTED  # the sweep's mutex
    finally:
        lock.release()
        lock.close()


def test_the_products_own_connections_follow_the_settings_unless_the_alias_sets_its_own(
    settings: Any,
) -> None:
    """A site whose DATABASES name no keepalives still gets them on the connections the product
    makes itself; the alias's own OPTIONS win there, but not on the liveness session, whose
    fence is timed by the settings."""
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "DB_TCP_USER_TIMEOUT_MS": 4000}):
        system = connections["system"].settings_dict
        saved = dict(system["OPTIONS"])
        try:
            system["OPTIONS"] = {"keepalives_idle": 9}
            params = connection_kwargs("system")
            assert (params["keepalives_idle"], params["tcp_user_timeout"]) == (9, 4000)
            assert session_params()["keepalives_idle"] == 5
        finally:
            system["OPTIONS"] = saved


def _server_end(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The server's keepalives and user timeout for this session's socket, as it applies them:
    0 on a Unix-domain socket (no TCP: nothing to bound)."""
    rows = conn.execute(
        "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
        [server_socket_settings()[0]],
    ).fetchall()
    return dict(rows)


def test_the_sessions_that_hold_the_fleets_locks_bound_the_servers_end_too() -> None:
    """The liveness session and the sweep's mutex give the server the same bounds for its end
    of their socket (so a vanished host's lock is let go within them: the vanished-host chaos
    test); the mutex's only for its transaction. Other sessions keep the server's own."""
    names, values = server_socket_settings()
    conn = psycopg.connect(**session_params(), autocommit=True)
    try:
        tcp = bool(conn.info.hostaddr)
        wanted = dict(zip(names, values, strict=True)) if tcp else dict.fromkeys(names, "0")
        plain = _server_end(conn)
        taken = conn.execute(
            TAKE_LIVENESS_LOCK.sql,
            TakeParams(
                new_key(), "socket-test", "NOOP", "default", "h", 1, names, values
            )._asdict(),
        ).fetchall()
        assert taken
        assert _server_end(conn) == wanted
    finally:
        conn.close()
    lock = SweepLock()
    try:
        assert lock.acquire(timeout_s=5)
        assert _server_end(lock._connection()) == wanted
    finally:
        lock.release()
    try:
        assert _server_end(lock._connection()) == plain  # the transaction ended: back as it was
    finally:
        lock.close()
