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
restarted) the lock may be free: the worker claims nothing more (claims on their way are handed
back unrun) and at once takes a lock under a new key on a new session. A key is never taken
twice: the rescue cannot mistake a new session for one it saw gone, and a session the server
has not yet noticed is gone (a cut network) never delays the new one.

A blip (a pooler restart, a failover, ``pg_terminate_backend``) need not cost a long item its
run. Once the new lock is held, one statement on the new session (``keep_claims``) reads which
of the claims the worker held still hold (claimed under the same token, the lease not run out,
by the database's clock): those handlers go on (``on_kept``), the others are cancelled, writing
nothing. Why that is safe, where it bites, is said in ``_keep_or_fence``: in short, the rescue
hands a holder's items back only after seeing its lock free twice ``SWEEP_RESCUE_GRACE_S``
apart, after the last check that proved it held, and re-checks the holder is still gone beside
the hand-back; the worker decides before that grace has passed since that check, or fences
every item as before (``on_lost``: its handlers cancelled, its leases no longer renewed).

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

from workers.config import WorkerSettings
from workers.jobs import LIVENESS_LOST
from workers.outage import Outage, server_of
from workers.periodic import PeriodicTask
from workqueue.runtime import Fence
from wqcore.conf import connection_options, libpq_params, server_socket_settings, system_alias
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
    # The server's bounds for its end of this session (``server_socket_settings``).
    socket_names: list[str]
    socket_values: list[str]


class KeepParams(NamedTuple):
    org_ids: list[Any]
    ids: list[Any]
    tokens: list[Any]


TAKE_LIVENESS_LOCK = Statement("take_liveness_lock", TakeParams, _SQL)
CHECK_LIVENESS = Statement("check_liveness", NoParams, _SQL)
KEEP_CLAIMS = Statement("keep_claims", KeepParams, _SQL)


def session_params() -> dict[str, Any]:
    """How the liveness session connects: the system login's parameters, with the product's
    keepalives and user timeout whatever the URL says (a server that vanished, its host or the
    network, is noticed by the socket too, not only by the next check)."""
    return {**libpq_params(system_alias()), **connection_options()}


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
        holding: Callable[[], list[Fence]] | None = None,
        on_kept: Callable[[list[Fence], set[Fence]], int] | None = None,
        params: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_lost`` fences the worker and returns how many items it held; ``on_held`` tells
        its claim loop it may claim. ``holding`` names the claims the worker holds, and
        ``on_kept(held, kept)`` lets those of ``held`` in ``kept`` go on and fences the others,
        returning how many it fenced (without both, every loss fences everything). All are
        called on the keeper's thread. ``params``: how the session connects (default
        ``session_params()``)."""
        self.worker_id = worker_id
        self.kind = kind
        self.lane = lane
        self.check_s = check_s
        self.grace_s = grace_s
        self._outage = outage
        self._on_lost = on_lost
        self._on_held = on_held
        self._holding = holding
        self._on_kept = on_kept
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
        # When the last check that proved the lock held (or the take that took it) was sent,
        # on this clock: the lock lived until at least then (``_keep_or_fence``).
        self._proved_at: float | None = None
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
            return await self._take_again()
        sent = self._clock()
        check = asyncio.ensure_future(conn.execute(CHECK_LIVENESS.sql))
        if await self._answered(check):
            self._proved_at = sent
            return True
        failure = check.exception() if check.done() else None
        self._lose()
        self._dispose(check, conn)
        held, fenced, kept = await self._keep_or_fence()
        if held:
            self._lost_at = None  # back at once: this line says so
        # Said as soon as it is decided, before a new session is tried for (which may take up to
        # connect_timeout); by the outage's line when the database does not answer (the fence
        # is part of it), else by this one.
        log_event(
            logger,
            logging.INFO if not held and self._outage.active else logging.WARNING,
            "liveness_lost",
            worker=self.worker_id,
            fenced=fenced,
            kept=kept,
            error=_first_line(failure or TimeoutError(f"no answer in {self.check_timeout_s:g} s")),
            held_again=held,
        )
        return held or await self._take_again()

    async def _take_again(self) -> bool:
        """Take a lock; once one was lost, say how long after the loss it is held again."""
        held = await self._take()
        if held and self._lost_at is not None:
            after_s = round(self._clock() - self._lost_at, 2)
            log_event(logger, logging.INFO, "liveness_back", worker=self.worker_id, after_s=after_s)
            self._lost_at = None
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

    def _lose(self) -> None:
        """The session failed: no lock is held from now on (claims stop; one on its way is
        handed back unrun)."""
        self.held_epoch = None
        self._conn = None
        self._lost_at = self._clock()

    async def _keep_or_fence(self) -> tuple[bool, int, int]:
        """Take a new lock and keep the claims that still hold, or fence every item; returns
        whether a lock is held, how many items were fenced and how many kept.

        Why the kept handlers may go on. The rescue hands a holder's items to others only
        after two looks at least ``grace_s`` apart both saw its lock free, the first after the
        lock was lost, so never before ``grace_s`` after the last check that proved it held
        (``_proved_at``, when that check was sent). The worker decides before then, less a
        step: its new lock is in its row first (the take), and a look after that finds it
        alive; a rescue that found it gone before re-checks, beside its hand-back and with the
        row locked, that the row still names the lost lock (``still_gone``), so either it sees
        the worker back and hands nothing back, or the take waits for its hand-back to commit
        and ``keep_claims``, after the take, no longer finds those claims. A claim the lease
        path took meanwhile is not kept either (its lease ran out). Until it decides the
        worker claims nothing, and whatever its handlers write to the queue is fenced by the
        claim token as always, so a new holder is never hurt. When it cannot decide in time
        (the database away, a check that hung for most of the grace), it fences every item at
        once, inside the grace, as it always did."""
        proved_at = self._clock() if self._proved_at is None else self._proved_at
        deadline = proved_at + self.grace_s - CHECK_STEP_S
        if self._holding is None or self._on_kept is None or deadline <= self._clock():
            return False, self._on_lost(), 0  # the caller says so, then takes a new lock
        held_claims = self._holding()
        kept = await self._take_keeping(held_claims, deadline)
        if kept is None:
            return False, self._on_lost(), 0
        # Told before the new lock is published: a claim under it comes after the cancellations.
        fenced = self._on_kept(held_claims, kept)
        self._publish()
        return True, fenced, len(kept)

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
        return await self._take_keeping(None, None) is not None

    async def _take_keeping(
        self, keeping: list[Fence] | None, deadline: float | None
    ) -> set[Fence] | None:
        """Take a lock under a new key; with ``keeping``, also read which of those claims still
        hold, all by ``deadline``, and leave the lock unpublished (``_publish``). Returns the
        claims kept (empty without ``keeping``), None when no lock is held."""
        started = self._outage.now()
        proved = self._clock()
        key = new_key()
        timeout_s = TAKE_TIMEOUT_S if deadline is None else deadline - proved
        conn: psycopg.AsyncConnection[Any] | None = None
        kept: set[Fence] = set()
        try:
            async with asyncio.timeout(timeout_s):
                conn = await self._connect_and_lock(key)
                if conn is not None and keeping:
                    kept = await _keep_claims(conn, keeping)
        except Exception as exc:
            if conn is not None:  # locked but not decided in time: let the lock go
                await _close(conn)
                conn = None
            if not self._outage.failed("liveness", exc) and not self._take_failing:
                log_event(
                    logger,
                    logging.ERROR,
                    "liveness_lock_failed",
                    worker=self.worker_id,
                    error=_first_line(exc),
                )
            self._take_failing = True
            return None
        if conn is None:
            return None  # another session holds that key: a new one next time
        self._outage.connected(server_of(conn))
        self._outage.ok(started)
        self._take_failing = False
        self._conn = conn
        self._proved_at = proved
        if keeping is None:
            self._publish()
        return kept

    def _publish(self) -> None:
        """The lock is held: claims may be made under it."""
        self._epochs += 1
        self.held_epoch = self._epochs
        self._on_held()

    async def _connect_and_lock(self, key: int) -> psycopg.AsyncConnection[Any] | None:
        """A new session holding the lock on ``key``, its key in the worker's row; None when
        another session holds that key."""
        if self._params is None:
            self._params = await asyncio.to_thread(session_params)
        conn = await psycopg.AsyncConnection.connect(**self._params, autocommit=True)
        try:
            params = TakeParams(
                key,
                self.worker_id,
                self.kind,
                self.lane,
                socket.gethostname(),
                os.getpid(),
                *server_socket_settings(),
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


async def _keep_claims(conn: psycopg.AsyncConnection[Any], fences: list[Fence]) -> set[Fence]:
    """Which of ``fences`` still hold (``keep_claims``, one statement)."""
    params = KeepParams(
        [f.org_id for f in fences], [f.item_id for f in fences], [f.claim_token for f in fences]
    )
    cursor = await conn.execute(KEEP_CLAIMS.sql, params._asdict())
    still = {row[0] for row in await cursor.fetchall()}
    return {fence for fence in fences if fence.item_id in still}


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
    """A worker's liveness lock, when it takes one: on its loss the worker keeps the claims
    that still hold once it holds a new lock and fences itself from the others (their leases
    dropped, their handlers cancelled as ``LIVENESS_LOST``, writing nothing), or from all when
    it cannot tell in time; once a lock is held again, its claim loop is woken
    (``claims_wake()``, set on the worker's loop)."""
    if not settings.holds_liveness_lock:
        return None
    jobs, leases = runner.jobs, runner.leases

    def fence() -> int:
        leases.drop_all()
        return jobs.lose_all_threadsafe(LIVENESS_LOST)

    def holding() -> list[Fence]:
        return [job.fence for job in jobs.running() if job.cancel_reason is None]

    def keep(held: list[Fence], kept: set[Fence]) -> int:
        for fence_ in held:
            if fence_ not in kept:
                leases.drop(fence_)
        return jobs.lose_all_but_threadsafe(kept, LIVENESS_LOST)

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
        holding=holding,
        on_kept=keep,
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
