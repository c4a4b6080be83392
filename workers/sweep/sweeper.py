"""One sweep pass: every step in order, while holding the sweep's mutex (one sweeper at a time)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import connections

from tenancy.contexts import AppType, RequestContext, new_request_context
from workers.outage import Outage
from workers.sweep import (
    enqueue_schedules,
    keep_minutes,
    move_history,
    purge_items,
    purge_outbox,
    purge_rate_buckets,
    purge_request_keys,
    purge_sessions,
    relay_outbox,
    requeue_stale,
    rescue,
    roll_up_minutes,
    rotate_ready,
)
from workers.sweep.config import SweepSettings
from wqcore.appname import named
from wqcore.conf import libpq_params, server_socket_settings, system_alias
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

# The sweep's mutex (workqueue.models.Mutex): a row only the system login may lock. Not an
# advisory lock, which any login could take and hold, stalling every sweeper.
MUTEX = "workers.sweep"

Step = Callable[[RequestContext, SweepSettings], Any]

# The order matters: a gone worker's items and stale claims back first (work waiting), the
# ready ring turned (what came due promoted), the outbox relayed, the schedules' due ticks
# enqueued, the gauges page's days kept (made ahead, dropped past the retention) and the
# attempts rolled up into them (before the purge of items, which takes their attempts with
# them), done items moved to history (its spans past the retention dropped whole, before the
# purge would delete their rows one by one), then the purges. (The gauges
# are read by the one endpoint exporting them, when scraped: workers.gauges.)
STEPS: list[tuple[str, Step]] = [
    ("rescue", rescue.run_once),
    ("requeue_stale", requeue_stale.run_once),
    ("rotate_ready", rotate_ready.run_once),
    ("relay_outbox", relay_outbox.run_once),
    ("enqueue_schedules", enqueue_schedules.run_once),
    ("keep_minutes", keep_minutes.run_once),
    ("roll_up_minutes", roll_up_minutes.run_once),
    ("purge_outbox", purge_outbox.run_once),
    ("move_history", move_history.run_once),
    ("purge_items", purge_items.run_once),
    ("purge_sessions", purge_sessions.run_once),
    ("purge_request_keys", purge_request_keys.run_once),
    ("purge_rate_buckets", purge_rate_buckets.run_once),
]

# The rescue alone, on its own short timer (SWEEP_RESCUE_INTERVAL_S), without the mutex: it is
# idempotent (workers/sweep/rescue.py), and a gone worker's items should not wait for a pass.
# The fleet's timers take turns to look.
RESCUE_STEPS: list[tuple[str, Step]] = [("rescue", rescue.run_on_timer)]


@dataclass
class PassResult:
    # step name -> what its run_once returned (absent when it failed)
    results: dict[str, Any] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    took_s: float = 0.0


class SweepLock:
    """Holds the sweep's mutex for a pass: its own connection on the system login, in a
    transaction that locks the mutex's row and stays open (idle) while the pass's steps run on
    the thread's other connections. If this process freezes or dies mid-pass, PostgreSQL ends
    the transaction (``idle_in_transaction_session_timeout``, a little over the pass's
    timeout, set by the statement that takes the lock, for that transaction only: behind a
    transaction pooler a session's setting would land on some other client's server
    connection) and another sweeper may go on."""

    def __init__(self) -> None:
        self._conn: psycopg.Connection[Any] | None = None

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            params = named(libpq_params(system_alias()), "sweep")
            self._conn = psycopg.connect(**params, autocommit=False)
        return self._conn

    def acquire(self, timeout_s: float) -> bool:
        """Take the mutex if no other sweeper holds it (never waits on a holder)."""
        idle_ms = int((timeout_s + 30) * 1000)
        try:
            conn = self._connection()
            held = self._try_lock(conn, idle_ms)
            if not held and not _row_exists(conn):
                # First pass ever: create the row in its own short transaction, then try again.
                conn.execute(
                    "INSERT INTO workqueue_mutex (name) VALUES (%s) ON CONFLICT DO NOTHING",
                    [MUTEX],
                )
                conn.commit()
                held = self._try_lock(conn, idle_ms)
        except psycopg.Error:
            self.close()
            raise
        if not held:
            conn.rollback()
        return held

    @staticmethod
    def _try_lock(conn: psycopg.Connection[Any], idle_ms: int) -> bool:
        """Lock the mutex's row if it is free, and then (the same statement) bound how long
        this transaction may sit idle, and how long the server keeps it once this host is
        cut off (its keepalives and user timeout on this socket: ``server_socket_settings``);
        both for this transaction only."""
        names, values = server_socket_settings()
        rows = conn.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, true),"
            " (SELECT count(set_config(s.name, s.value, true))"
            "    FROM unnest(%s::text[], %s::text[]) AS s(name, value))"
            " FROM workqueue_mutex WHERE name = %s FOR UPDATE SKIP LOCKED",
            [str(idle_ms), names, values, MUTEX],
        ).fetchall()
        return bool(rows)

    def release(self) -> None:
        try:
            if self._conn is not None and not self._conn.closed:
                self._conn.rollback()
        except psycopg.Error:
            self.close()  # the session is gone, and the lock with it

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _row_exists(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT EXISTS (SELECT FROM workqueue_mutex WHERE name = %s)", [MUTEX])
    found = row.fetchone()  # EXISTS answers one row
    return found is not None and bool(found[0])


_LOCKS = threading.local()


def close_lock() -> None:
    """Close this thread's mutex connection (when the thread's process stops sweeping)."""
    holder = getattr(_LOCKS, "holder", None)
    if holder is not None:
        holder.close()


def _lock() -> SweepLock:
    """This thread's holder (a sweep runs on one thread: the worker's maintenance thread, or
    ``manage.py sweep``'s)."""
    holder: SweepLock | None = getattr(_LOCKS, "holder", None)
    if holder is None:
        holder = _LOCKS.holder = SweepLock()
    return holder


def sweep_once(
    settings: SweepSettings,
    rctx: RequestContext | None = None,
    steps: list[tuple[str, Step]] | None = None,
    outage: Outage | None = None,
    on_step: Callable[[str, int, int], object] | None = None,
) -> PassResult | None:
    """Run one pass if no other sweeper is in one; returns what each step did, or None when
    another sweeper held the lock (this pass skipped). A step's failure is logged once and
    the pass goes on; one that meets a database gone away is ``outage``'s to log, when given.
    ``on_step`` is told each step's name, place and the steps' count before it runs (a
    command's progress). Sync: run it off an event loop."""
    rctx = rctx or new_request_context(AppType.SWEEP)
    lock = _lock()
    if not lock.acquire(settings.timeout_s):
        log_event(logger, logging.DEBUG, "sweep_skipped", reason="another_sweeper")
        return None
    try:
        return _run_steps(steps or STEPS, rctx, settings, outage, on_step)
    finally:
        lock.release()


def rescue_once(settings: SweepSettings, outage: Outage | None = None) -> PassResult:
    """Run the rescue alone (``RESCUE_STEPS``), without the sweep's mutex (it is idempotent:
    workers/sweep/rescue.py); as ``sweep_once`` otherwise. Sync: run it off an event loop."""
    return _run_steps(RESCUE_STEPS, new_request_context(AppType.SWEEP), settings, outage)


def _run_steps(
    steps: list[tuple[str, Step]],
    rctx: RequestContext,
    settings: SweepSettings,
    outage: Outage | None,
    on_step: Callable[[str, int, int], object] | None = None,
) -> PassResult:
    started = time.monotonic()
    result = PassResult()
    for place, (name, step) in enumerate(steps, start=1):
        if on_step is not None:
            on_step(name, place, len(steps))
        try:
            result.results[name] = step(rctx, settings)
        except Exception as exc:
            result.failed.append(name)
            if outage is None or not outage.failed("sweep", exc):
                log_event(logger, logging.ERROR, "sweep_step_failed", exc_info=True, step=name)
            # A broken connection must not fail every later step too.
            for conn in connections.all(initialized_only=True):
                conn.close_if_unusable_or_obsolete()
    result.took_s = time.monotonic() - started
    return result
