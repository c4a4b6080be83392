"""The liveness lock: what tells the sweep, within a second or two, that a worker's process died.

Before its first claim a worker opens a connection of its own on the system login (TCP
keepalives on) and takes a session-level advisory lock under a key of its own, recording the
key in its row (``Worker.lock_key``) in the same statement. PostgreSQL holds that lock exactly
as long as the session lives. A process that dies (SIGKILL, the OOM killer, a crash) has its
sockets closed by the kernel, its session ends and the lock is free at once: the sweep's rescue
(``workers/sweep/rescue.py``) hands its items back once it has seen the lock free for
``SWEEP_RESCUE_GRACE_S``, instead of after their lease. A frozen process (SIGSTOP) keeps its
session, and its lock: its items wait for their lease, as before.

The worker checks the session every ``WORKER_LIVENESS_CHECK_S``, each check bounded by the grace
less one interval. When a check fails (the session was terminated, the network cut, the server
restarted) the lock may be free, so the worker fences itself at once, well inside the grace
(``on_lost``: its handlers cancelled, its leases no longer renewed, claims on their way handed
back unrun), then reconnects and takes a lock under a new key before it claims again. A key is
never taken twice: the rescue cannot mistake a new session for one it saw gone, and a session
the server has not yet noticed is gone (a cut network) never delays the new one.

The checks run on the lease keeper's thread, on its loop (``offloop.py``): a handler that
blocks the worker's loop delays neither the check nor the flag that tells sync handlers.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import psycopg
from django.db import connections

from workers.config import WorkerSettings
from workers.jobs import LIVENESS_LOST
from workers.outage import Outage, server_of
from workers.periodic import PeriodicTask
from wqcore.conf import CONNECTION_OPTIONS, system_alias
from wqcore.logs import log_event
from wqcore.statements import NoParams, Statement

if TYPE_CHECKING:
    from workers.running import Runner

logger = logging.getLogger(__name__)

_SQL = Path(__file__).with_name("sql")

# How long making the session and taking the lock may take (each attempt).
TAKE_TIMEOUT_S = 5.0
# A check's timeout is counted in steps of this (``LivenessLock._answered``).
CHECK_STEP_S = 0.05
# Between attempts to take a lock again while the database does not answer.
RETAKE_S = 0.5


class TakeParams(NamedTuple):
    key: int
    id: str
    kind: str
    lane: str
    host: str
    pid: int


TAKE_LIVENESS_LOCK = Statement("take_liveness_lock", TakeParams, _SQL)
CHECK_LIVENESS = Statement("check_liveness", NoParams, _SQL)


def session_params() -> dict[str, Any]:
    """How the liveness session connects: the system login's parameters, with the product's
    keepalives and user timeout whatever the URL says (a server that vanished, its host or the
    network, is noticed by the socket too, not only by the next check)."""
    params = connections[system_alias()].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    return {**params, **CONNECTION_OPTIONS}


def new_key() -> int:
    """A fresh positive 63-bit key (a collision with another session's advisory lock, or a
    key taken before, is as likely as guessing it)."""
    return secrets.randbits(62) + 1


class LivenessLock:
    def __init__(
        self,
        worker_id: str,
        kind: str,
        lane: str,
        *,
        check_s: float,
        grace_s: float,
        outage: Outage,
        on_lost: Callable[[], int],
        on_held: Callable[[], None],
        params: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_lost`` fences the worker and returns how many items it held; ``on_held`` tells
        its claim loop it may claim. Both are called on the keeper's thread. ``params``: how
        the session connects (default ``session_params()``)."""
        self.worker_id = worker_id
        self.kind = kind
        self.lane = lane
        self.check_s = check_s
        self.grace_s = grace_s
        self._outage = outage
        self._on_lost = on_lost
        self._on_held = on_held
        self._clock = clock
        self._params = params
        self._conn: psycopg.AsyncConnection[Any] | None = None
        # Which lock the worker holds now (None: none, it must not claim). Read by the claim
        # loop on the worker's loop: a claim sent under one number and returned under another
        # (or none) is handed back unrun.
        self.held_epoch: int | None = None
        self._epochs = 0
        # When the lock was lost (for the line that says it is held again), and whether the
        # failures to take it again have been logged (once per streak).
        self._lost_at: float | None = None
        self._take_failing = False
        # Failed sessions being closed in the background.
        self._disposing: set[asyncio.Future[None]] = set()

    @property
    def check_timeout_s(self) -> float:
        """A check that has not answered by then counts as failed: the worker fences itself
        within one interval and this of losing its session, before the grace ends."""
        return max(self.grace_s - self.check_s, self.check_s)

    @property
    def retry_s(self) -> float:
        return max(self.check_s, RETAKE_S)

    async def check_once(self) -> bool:
        """Take the lock if none is held, else check the session; on a failure, fence and take
        a new one at once. True while a lock is held."""
        conn = self._conn
        if conn is None:
            held = await self._take()
            if held and self._lost_at is not None:
                after_s = round(self._clock() - self._lost_at, 2)
                log_event(
                    logger, logging.INFO, "liveness_back", worker=self.worker_id, after_s=after_s
                )
                self._lost_at = None
            return held
        check = asyncio.ensure_future(conn.execute(CHECK_LIVENESS.sql))
        if await self._answered(check):
            return True
        failure = check.exception() if check.done() else None
        fenced = self._fence()
        self._dispose(check, conn)
        held = await self._take()
        if held:
            self._lost_at = None  # back at once: this line says so
        # Said once: by the outage's line when the database does not answer (the fence is part
        # of it), else by this one.
        log_event(
            logger,
            logging.INFO if not held and self._outage.active else logging.WARNING,
            "liveness_lost",
            worker=self.worker_id,
            fenced=fenced,
            error=_first_line(failure or TimeoutError(f"no answer in {self.check_timeout_s:g} s")),
            held_again=held,
        )
        return held

    async def _answered(self, check: asyncio.Future[Any]) -> bool:
        """Whether ``check`` answered within ``check_timeout_s``, counted in steps of this
        loop's own time: a process that stood still (SIGSTOP) with a check on its way finds the
        answer that came meanwhile, instead of a timeout that passed while nothing ran. The
        check is waited on, never cancelled by the timeout: psycopg would then cancel the query
        on the server and wait for that, up to seconds, and the fence must not wait behind it."""
        for _ in range(max(1, math.ceil(self.check_timeout_s / CHECK_STEP_S))):
            done, _ = await asyncio.wait({check}, timeout=CHECK_STEP_S)
            if done:
                return check.exception() is None
        return False

    async def close(self) -> None:
        """End the session (the lock with it): the worker has settled everything it held."""
        conn, self._conn = self._conn, None
        self.held_epoch = None
        await _close(conn)
        await asyncio.gather(*self._disposing, return_exceptions=True)

    def _fence(self) -> int:
        """The session failed: no lock is held from now on (claims stop), and the worker fences
        itself (its handlers cancelled, its leases dropped); returns how many items it held."""
        self.held_epoch = None
        self._conn = None
        self._lost_at = self._clock()
        return self._on_lost()

    def _dispose(self, check: asyncio.Future[Any], conn: psycopg.AsyncConnection[Any]) -> None:
        """Close the failed session in the background (a check that hangs is cancelled first)."""

        async def dispose() -> None:
            if not check.done():
                check.cancel()
            await asyncio.gather(check, return_exceptions=True)
            await _close(conn)

        task = asyncio.ensure_future(dispose())
        self._disposing.add(task)
        task.add_done_callback(self._disposing.discard)

    async def _take(self) -> bool:
        started = self._outage.now()
        key = new_key()
        try:
            async with asyncio.timeout(TAKE_TIMEOUT_S):
                conn = await self._connect_and_lock(key)
        except Exception as exc:
            if not self._outage.failed("liveness", exc) and not self._take_failing:
                log_event(
                    logger,
                    logging.ERROR,
                    "liveness_lock_failed",
                    worker=self.worker_id,
                    error=_first_line(exc),
                )
            self._take_failing = True
            return False
        if conn is None:
            return False  # another session holds that key: a new one next time
        self._outage.connected(server_of(conn))
        self._outage.ok(started)
        self._take_failing = False
        self._conn = conn
        self._epochs += 1
        self.held_epoch = self._epochs
        self._on_held()
        return True

    async def _connect_and_lock(self, key: int) -> psycopg.AsyncConnection[Any] | None:
        """A new session holding the lock on ``key``, its key in the worker's row; None when
        another session holds that key."""
        if self._params is None:
            self._params = await asyncio.to_thread(session_params)
        conn = await psycopg.AsyncConnection.connect(**self._params, autocommit=True)
        try:
            params = TakeParams(
                key, self.worker_id, self.kind, self.lane, socket.gethostname(), os.getpid()
            )
            cursor = await conn.execute(TAKE_LIVENESS_LOCK.sql, params._asdict())
            taken = await cursor.fetchall()
        except BaseException:
            await _close(conn)
            raise
        if not taken:
            await _close(conn)
            return None
        return conn


async def _close(conn: psycopg.AsyncConnection[Any] | None) -> None:
    if conn is None:
        return
    try:
        async with asyncio.timeout(1.0):
            await conn.close()
    except (psycopg.Error, OSError, TimeoutError):
        pass  # the session is gone already, or goes with the socket


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def fencing_lock(
    worker_id: str,
    settings: WorkerSettings,
    outage: Outage,
    runner: Runner,
    claims_wake: Callable[[], asyncio.Event],
) -> LivenessLock | None:
    """A worker's liveness lock, when it takes one: on its loss the worker fences itself (every
    lease dropped, every handler cancelled as ``LIVENESS_LOST``, writing nothing); once one is
    held again, its claim loop is woken (``claims_wake()``, set on the worker's loop)."""
    if not settings.holds_liveness_lock:
        return None
    jobs, leases = runner.jobs, runner.leases

    def fence() -> int:
        leases.drop_all()
        return jobs.lose_all_threadsafe(LIVENESS_LOST)

    def held() -> None:
        if jobs.loop is not None:
            jobs.loop.call_soon_threadsafe(claims_wake().set)

    return LivenessLock(
        worker_id,
        ",".join(settings.kinds),
        settings.lane,
        check_s=settings.liveness_check_s,
        grace_s=settings.rescue_grace_s,
        outage=outage,
        on_lost=fence,
        on_held=held,
    )


def liveness_task(lock: LivenessLock, stop: asyncio.Event, outage: Outage) -> PeriodicTask:
    """The lock's checks on the keeper's loop: every ``check_s`` while held, every ``retry_s``
    while none could be taken (each attempt bounded on its own)."""
    return PeriodicTask(
        name="liveness_lock",
        operation=lock.check_once,
        interval_s=lock.check_s,
        mode="result_aware",
        delay_for=lambda held: lock.check_s if held else lock.retry_s,
        error_delay_s=lock.retry_s,
        timeout_s=None,
        stop=stop,
        on_error="continue",
        report=lambda exc: outage.failed("liveness", exc),
    )
