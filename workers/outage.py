"""One account of whether the database answers, shared by every part of a worker.

During an outage every part fails at once (the claim, the completions, the lease renewals, the
heartbeat, LISTEN). Each reports here; the worker logs the state change twice (``database_
unreachable`` once when it starts, ``database_back`` once when it ends) instead of one line or
traceback per part per attempt, and the claim loop backs off while it lasts. The outage ends
once the database has answered with no failure for ``settle_s``: parts recover one by one (a
session that outlived the failure answers once, the next attempt fails again), and a flapping
start or end of an outage is still one outage.

Parts report from the worker's loop and from the lease keeper's thread: the account is behind
a lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

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


def is_unreachable(exc: BaseException) -> bool:
    if isinstance(exc, UNREACHABLE):
        return True
    # Django wraps driver errors; look at the cause.
    cause = exc.__cause__
    return cause is not None and isinstance(cause, UNREACHABLE)


class Outage:
    def __init__(self, clock: Callable[[], float] = time.monotonic, settle_s: float = 1.0) -> None:
        self._clock = clock
        self.settle_s = settle_s
        self.since: float | None = None
        self.last_failure: float | None = None
        self.failures = 0
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
        if began:
            log_event(
                logger,
                logging.WARNING,
                "database_unreachable",
                part=part,
                error=_first_line(exc),
            )
        return True

    def now(self) -> float:
        """This account's clock: read it before a call, hand it to ``ok`` after."""
        return self._clock()

    def ok(self, started: float | None = None) -> None:
        """Record that the database answered a call made at ``started`` (default: now); logs
        the end of an outage once, when no part has failed for ``settle_s``. An answer to a call
        made before the outage began does not count: the parts fail a moment apart, and one
        that was mid-call when another failed would otherwise end the outage at once."""
        if self.since is None:  # the common case, without the lock
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
        log_event(
            logger,
            logging.WARNING,
            "database_back",
            after_s=round(now - since, 1),
            failures=failures,
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
