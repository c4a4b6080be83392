"""One account of whether the database answers, shared by every part of a worker.

During an outage every part fails at once (the claim, the completions, the lease renewals, the
heartbeat, LISTEN). Each reports here; the worker logs the state change twice (``database_
unreachable`` once when it starts, ``database_back`` once when it ends) instead of one line or
traceback per part per attempt, and the claim loop backs off while it lasts. The outage ends
once the database has answered with no failure for ``settle_s``: parts recover one by one (a
session that outlived the failure answers once, the next attempt fails again), and a flapping
start or end of an outage is still one outage.

The parts that hold a session of their own (LISTEN, the liveness lock) say which server they
reached each time they connect (``connected``); when the outage ends on another server than
the one before it (a failover: libpq's multi-host URL found the promoted standby, or a DNS name
now resolves to it), ``database_back`` names both (``server=... was=...``).

Parts report from the worker's loop and from the lease keeper's thread: the account is behind
a lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg_pool

from wqcore.logs import log_event

logger = logging.getLogger(__name__)

# Errors that mean "the database is not answering", not "this statement is wrong".
# A timeout (a renewal or a statement bounded by the worker) counts: a database that does not
# answer in time is, for the worker, not answering.
UNREACHABLE = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    psycopg_pool.PoolTimeout,
    OSError,
    TimeoutError,
)


def _sqlstate(exc: BaseException) -> str | None:
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, psycopg.Error) and seen.sqlstate:
            return seen.sqlstate
        seen = seen.__cause__
    return None


def is_unreachable(exc: BaseException) -> bool:
    # Django wraps driver errors (and a caller may wrap Django's): look down the causes.
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, UNREACHABLE):
            return True
        seen = seen.__cause__
    return False


class Outage:
    def __init__(self, clock: Callable[[], float] = time.monotonic, settle_s: float = 1.0) -> None:
        self._clock = clock
        self.settle_s = settle_s
        self.since: float | None = None
        self.last_failure: float | None = None
        self.failures = 0
        # How many outages began (a part that holds a session checks it after each one).
        self.began = 0
        # The server the parts last reached, and the one the outage began on.
        self.server: str | None = None
        self._server_before: str | None = None
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self.since is not None

    def failed(self, part: str, exc: BaseException) -> bool:
        """Record a failure of ``part``; True when it is the database not answering (logged
        once per outage), False for any other error (the caller logs that one itself)."""
        if not is_unreachable(exc):
            return False
        with self._lock:
            self.failures += 1
            self.last_failure = self._clock()
            began = self.since is None
            if began:
                self.since = self.last_failure
                self.began += 1
                self._server_before = self.server
        if began:
            # The server's own code when it answered with a refusal (53100 a full disk, 55P03
            # a lock timeout): it is there, and the error says what to free.
            code = _sqlstate(exc)
            log_event(
                logger,
                logging.WARNING,
                "database_unreachable",
                part=part,
                error=_first_line(exc),
                **({"sqlstate": code} if code else {}),
            )
        return True

    def connected(self, server: str) -> None:
        """A part reached ``server`` (``server_of`` its new session)."""
        with self._lock:
            self.server = server

    def now(self) -> float:
        """This account's clock: read it before a call, hand it to ``ok`` after."""
        return self._clock()

    def ok(self, started: float | None = None) -> None:
        """Record that the database answered a call made at ``started`` (default: now); logs
        the end of an outage once, when no part has failed for ``settle_s``. An answer to a call
        made before the outage began does not count: the parts fail a moment apart, and one
        that was mid-call when another failed would otherwise end the outage at once."""
        if not self.active:  # the common case, without the lock (checked again under it)
            return
        with self._lock:
            since, last_failure, failures = self.since, self.last_failure, self.failures
            if since is None or last_failure is None:
                return
            if started is not None and started < since:
                return
            now = self._clock()
            if now - last_failure < self.settle_s:
                return
            self.since, self.last_failure, self.failures = None, None, 0
            server, before = self.server, self._server_before
        log_event(
            logger,
            logging.WARNING,
            "database_back",
            after_s=round(now - since, 1),
            failures=failures,
            server=server,
            was=before if before is not None and before != server else None,
        )


def server_of(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> str:
    """Which server a session reached: ``host:port``, and the address the host resolved to
    when it is a name (behind one DNS name a failover changes only the address)."""
    info = conn.info
    try:
        address = info.hostaddr
    except psycopg.NotSupportedError:  # a libpq older than 12
        address = ""
    where = f"{info.host}:{info.port}"
    return f"{where} ({address})" if address and address != info.host else where


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# The driver's own warnings of a connection lost or not made, by logger and how each begins:
# psycopg.pool's (psycopg_pool/pool.py, pool_async.py: a failed connection attempt, a broken
# connection discarded) and psycopg's (a pipeline or a rollback on a connection that is gone).
DRIVER_WARNINGS = {
    "psycopg.pool": (
        "error connecting in",
        "reconnection attempt in pool",
        "discarding broken connection",
        "discarding closed connection",
        "task run",
        "rollback failed",
        "error resetting connection",
    ),
    "psycopg": ("error ignored", "query cancellation failed"),
}


class DriverWarnings(logging.Filter):
    """Folds the driver's own warnings of lost connections into ``outage``: one carrying the
    error it met (a failed connection attempt, or a connection lost with its server's error on
    it) is the outage's failure, logged once as ``database_unreachable``, and while the outage
    lasts the others are dropped; they come a dozen a second otherwise, each the same news.
    Outside an outage, one with no error of the database's going away still logs its own
    line."""

    def __init__(self, outage: Outage, logger_name: str) -> None:
        super().__init__(logger_name)
        self.outage = outage
        self.part = "pool" if logger_name == "psycopg.pool" else "driver"
        self.prefixes = DRIVER_WARNINGS[logger_name]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not isinstance(record.msg, str):
            return True
        if not record.msg.startswith(self.prefixes):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        errors = [a for a in args if isinstance(a, BaseException)]
        # A connection given back lost (``discarding closed connection``: the pool says so
        # before the statement that lost it fails in its caller) carries its server's error.
        errors += [lost for a in args if (lost := _lost(a)) is not None]
        if errors and self.outage.failed(self.part, errors[-1]):
            return False
        return not self.outage.active


def _lost(arg: object) -> psycopg.OperationalError | None:
    """The error a lost connection's server left on it (None: not a lost connection)."""
    if not isinstance(arg, psycopg.Connection | psycopg.AsyncConnection) or not arg.broken:
        return None
    message = arg.pgconn.error_message.decode(errors="replace").strip()
    return psycopg.OperationalError(message or "the connection is lost")


def fold_driver_warnings(outage: Outage) -> Callable[[], None]:
    """Put ``DriverWarnings`` on the driver's loggers; returns what takes them off again."""
    added = []
    for name in DRIVER_WARNINGS:
        folding = DriverWarnings(outage, name)
        logging.getLogger(name).addFilter(folding)
        added.append((name, folding))

    def unfold() -> None:
        for name, folding in added:
            logging.getLogger(name).removeFilter(folding)

    return unfold
