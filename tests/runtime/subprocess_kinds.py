"""Kinds and handlers for tests that run ``runworker`` as a real subprocess.

A subprocess loads them through ``WORKER_HANDLER_MODULES=tests.runtime.subprocess_kinds``
(``subprocess_env(handlers=True)``); the test process imports this module too, to enqueue them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from typing import Any

import pydantic

from tenancy.contexts import OpContext
from workqueue import api
from workqueue.api import (
    Kind,
    Payload,
    PermanentError,
    RetryPolicy,
    Run,
    WorkItem,
    handles,
    register,
)
from workqueue.kinds import max_payload_bytes
from workqueue.settle import complete


class SlowOncePayload(Payload):
    # Seconds the first attempt sleeps (a worker killed meanwhile leaves the item claimed);
    # later attempts finish at once.
    first_attempt_s: float = pydantic.Field(default=60.0, ge=0, le=3600)


SLOW_ONCE = register(Kind("TEST_SLOW_ONCE", SlowOncePayload, max_attempts=5))


@handles(SLOW_ONCE.name)
class SlowOnceHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        if item.attempts == 1:
            await asyncio.sleep(item.payload.get("first_attempt_s", 60.0))


# -- time limits, cancel, snooze (issue 20) -------------------------------------------------------
#
# Each run appends ``<item id> <attempt> <what>`` to the file its payload names (``log``):
# start, end, cancelled (the async handler saw its cancellation), late_write_refused /
# late_write_accepted (a sync handler that slept on past its cancellation tried to complete
# its item itself), snooze.


class LimitPayload(Payload):
    # sleep: sleep ``seconds`` (async: asyncio.sleep; sync: time.sleep, never looking at
    # run.cancelled); side_effect: mark a side effect, then sleep; snooze_once: snooze
    # ``seconds`` on the first run, return on the next; ok: return.
    action: str = "ok"
    seconds: float = pydantic.Field(default=0.0, ge=0, le=600)
    log: str = ""


# Two attempts, the second a second after the first.
FAST_RETRY = RetryPolicy(base_s=1.0, factor=1.0, cap_s=1.0, jitter=0)
# A one-second time limit: a handler that sleeps longer is cancelled.
TIMED = register(Kind("TEST_TIMED", LimitPayload, max_attempts=2, retry=FAST_RETRY, timeout=1))
TIMED_SYNC = register(
    Kind("TEST_TIMED_SYNC", LimitPayload, max_attempts=2, retry=FAST_RETRY, timeout=1)
)
# No time limit of their own beyond the site's default: for cancel and snooze.
LONG = register(Kind("TEST_LONG", LimitPayload, max_attempts=1, retry=FAST_RETRY))
LONG_SYNC = register(Kind("TEST_LONG_SYNC", LimitPayload, max_attempts=1, retry=FAST_RETRY))
LIMIT_KINDS = ",".join(k.name for k in (TIMED, TIMED_SYNC, LONG, LONG_SYNC))


def note(item: WorkItem, what: str) -> None:
    path = item.payload.get("log")
    if path:
        with open(path, "a") as log:
            log.write(f"{item.id} {item.attempts} {what}\n")


def noted(path: str) -> list[tuple[str, int, str]]:
    """The lines the handlers wrote: (item id, attempt, what)."""
    try:
        with open(path) as log:
            lines = log.read().splitlines()
    except FileNotFoundError:
        return []
    return [(i, int(a), what) for i, a, what in (line.split() for line in lines)]


class LimitedAsync:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        note(item, "start")
        action = item.payload.get("action", "ok")
        try:
            if action == "snooze_once":
                if not any(i == str(item.id) and w == "snooze" for i, _, w in noted(_log(item))):
                    note(item, "snooze")
                    run.snooze(item.payload.get("seconds", 1.0))
            elif action in ("sleep", "side_effect"):
                if action == "side_effect":
                    run.mark_side_effect()
                await asyncio.sleep(item.payload.get("seconds", 0.0))
        except asyncio.CancelledError:
            note(item, "cancelled")
            raise
        note(item, "end")


class LimitedSync:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        note(item, "start")
        action = item.payload.get("action", "ok")
        if action in ("sleep", "side_effect"):
            if action == "side_effect":
                run.mark_side_effect()
            time.sleep(item.payload.get("seconds", 0.0))  # never looks at run.cancelled
            # Abandoned meanwhile: a late write of its own is refused by the claim token.
            try:
                complete(ctx, item)
            except api.Conflict:
                note(item, "late_write_refused")
                return
            note(item, "late_write_accepted")
            return
        note(item, "end")


def _log(item: WorkItem) -> str:
    return str(item.payload.get("log", ""))


handles(TIMED.name)(type("TimedHandler", (LimitedAsync,), {}))
handles(LONG.name)(type("LongHandler", (LimitedAsync,), {}))
handles(TIMED_SYNC.name)(type("TimedSyncHandler", (LimitedSync,), {}))
handles(LONG_SYNC.name)(type("LongSyncHandler", (LimitedSync,), {}))


class LoggedPayload(Payload):
    # Fail for good (a dead letter) instead of returning.
    fail: bool = False


LOGGED = register(Kind("TEST_LOGGED", LoggedPayload, max_attempts=1))
_handler_logger = logging.getLogger("tests.runtime.subprocess_kinds")


@handles(LOGGED.name)
class LoggedHandler:
    """A sync handler (it runs in a thread) that logs a line of its own, then returns or fails."""

    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        _handler_logger.info("handler_says_hello")
        if item.payload.get("fail"):
            raise PermanentError("no such shipment\nsecond line of the message")


# -- results (tests/runtime/test_results.py) ------------------------------------------------------


class ReturnsPayload(Payload):
    # What the handler returns (any JSON); or, with ``make``, what cannot be stored: "set" (not
    # JSON), "nan", "big" (a string one byte over the payload's bound, as JSON).
    value: Any = None
    make: str = ""


RETURNS = register(Kind("TEST_RETURNS", ReturnsPayload, max_attempts=3))
RETURNS_SYNC = register(Kind("TEST_RETURNS_SYNC", ReturnsPayload, max_attempts=3))


def _returned(item: WorkItem) -> object:
    make = item.payload.get("make", "")
    if make == "set":
        return {"tags": {"a", "b"}}
    if make == "nan":
        return {"ratio": math.nan}
    if make == "big":
        return "x" * (max_payload_bytes() - 1)  # two quotes more as JSON
    return item.payload.get("value")


@handles(RETURNS.name)
class ReturnsHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> object:
        await asyncio.sleep(0)
        return _returned(item)


@handles(RETURNS_SYNC.name)
class ReturnsSyncHandler:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> object:
        return _returned(item)


# -- the claim's controls (tests/runtime/test_controls.py) ---------------------------------------
# Each run is recorded in RUNS_TABLE (made by the test, on the everyday login): at its start,
# with how many items of its key (or kind) the database then holds claimed, and at its end, both
# stamped by the database's clock (one clock for every worker process).
RUNS_TABLE = "runtime_control_runs"


class ControlledPayload(Payload):
    n: int = 0
    sleep_s: float = pydantic.Field(default=0.05, ge=0, le=60)


KEYED = Kind("TEST_KEYED", ControlledPayload, lane="keyed", max_attempts=3)
CAPPED_RUN = Kind(
    "TEST_CAPPED_RUN", ControlledPayload, lane="capped_run", max_attempts=3, max_running=3
)
# Registered in the runworker subprocess (which loads this module as a handler module), and in
# the test process only while a test of them runs (tests/runtime/test_controls.py): registered
# at import, their lanes and the cap would be every other test's.
if __name__ in os.environ.get("WORKER_HANDLER_MODULES", ""):
    register(KEYED)
    register(CAPPED_RUN)


def _record(item: WorkItem, event: str, running_sql: str, running_arg: object) -> None:
    from django.db import connections

    with connections["default"].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUNS_TABLE} (item_id, n, event, running, at)"
            f" SELECT %s, %s, %s, ({running_sql}), clock_timestamp()",
            [str(item.id), item.payload.get("n", 0), event, running_arg],
        )


def _count_claimed_sql(column: str) -> str:
    # Through the definer function the test made: the everyday login sees only its tenant's rows.
    return f"SELECT runtime_claimed_{column}(%s)"


class _Recording:
    column = "key"

    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        import time

        arg = item.concurrency_key if self.column == "key" else item.kind
        _record(item, "start", _count_claimed_sql(self.column), arg)
        time.sleep(item.payload.get("sleep_s", 0.05))
        _record(item, "end", _count_claimed_sql(self.column), arg)


@handles(KEYED.name)
class KeyedHandler(_Recording):
    column = "key"


@handles(CAPPED_RUN.name)
class CappedHandler(_Recording):
    column = "kind"


# -- progress and metadata (tests/runtime/test_progress.py) --------------------------------------


class ProgressPayload(Payload):
    # How many times the handler reports (run.progress), one row at a time.
    reports: int = pydantic.Field(default=100_000, ge=1, le=1_000_000)
    # Seconds the loop is spread over (it pauses after every 1,000 reports), so several of the
    # reporter's intervals pass while it reports.
    spread_s: float = pydantic.Field(default=1.0, ge=0, le=60)
    # Fail for good after the loop: its last report is written before the dead letter.
    fail: bool = False


PROGRESS = register(Kind("TEST_PROGRESS", ProgressPayload, max_attempts=1))
PROGRESS_SYNC = register(Kind("TEST_PROGRESS_SYNC", ProgressPayload, max_attempts=1))
PROGRESS_KINDS = f"{PROGRESS.name},{PROGRESS_SYNC.name}"
PROGRESS_STEP = 1_000


def _pause_s(item: WorkItem) -> float:
    steps = max(item.payload.get("reports", 100_000) // PROGRESS_STEP, 1)
    return float(item.payload.get("spread_s", 1.0)) / steps


def _reported(item: WorkItem, run: Run, started: float) -> None:
    """The end of the loop: what it did and how long it took from before its first report, in
    the metadata; then fail if asked."""
    run.set_meta({"reports": item.payload.get("reports"), "elapsed_s": time.monotonic() - started})
    if item.payload.get("fail"):
        raise PermanentError("failed after reporting")


@handles(PROGRESS.name)
class ProgressHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        total, pause = item.payload.get("reports", 100_000), _pause_s(item)
        started = time.monotonic()
        for done in range(1, total + 1):
            run.progress(done, total, note=f"row {done}")
            if done % PROGRESS_STEP == 0:
                await asyncio.sleep(pause)
        _reported(item, run, started)


@handles(PROGRESS_SYNC.name)
class ProgressSyncHandler:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        total, pause = item.payload.get("reports", 100_000), _pause_s(item)
        started = time.monotonic()
        for done in range(1, total + 1):
            run.progress(done, total, note=f"row {done}")
            if done % PROGRESS_STEP == 0:
                time.sleep(pause)
        _reported(item, run, started)


# -- fast rescue (tests/runtime/test_rescue.py) ---------------------------------------------------
# Each run appends ``<item id> <attempt> <pid> <what> <wall clock>`` to the file its payload names:
# start, end, cancelled (the handler saw its cancellation). Runs in several processes on one
# host share the wall clock, so two runs of one item can be told apart, and seen to overlap.


class MarkedPayload(Payload):
    # Seconds each run sleeps; the first attempt sleeps ``first_seconds`` instead, when given.
    seconds: float = pydantic.Field(default=0.0, ge=0, le=600)
    first_seconds: float | None = pydantic.Field(default=None, ge=0, le=600)
    log: str = ""


MARKED = register(Kind("TEST_MARKED", MarkedPayload, max_attempts=5))


def mark(item: WorkItem, what: str) -> None:
    with open(str(item.payload.get("log", "")), "a") as log:
        log.write(f"{item.id} {item.attempts} {os.getpid()} {what} {time.time():.6f}\n")


def marks(path: str) -> list[tuple[str, int, int, str, float]]:
    """The lines the runs wrote: (item id, attempt, pid, what, wall clock)."""
    try:
        with open(path) as log:
            lines = log.read().splitlines()
    except FileNotFoundError:
        return []
    return [(i, int(a), int(p), w, float(t)) for i, a, p, w, t in (ln.split() for ln in lines)]


@handles(MARKED.name)
class MarkedHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        mark(item, "start")
        seconds = item.payload.get("seconds", 0.0)
        if item.attempts == 1 and item.payload.get("first_seconds") is not None:
            seconds = item.payload["first_seconds"]
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            mark(item, "cancelled")
            raise
        mark(item, "end")


# -- the gauges page's charts (tests/e2e/test_charts.py) ------------------------------------------


class FlakyPayload(Payload):
    # Attempts that fail (and are retried after a second) before one succeeds; ``permanent``:
    # the first attempt fails for good (a dead letter).
    fail_first: int = pydantic.Field(default=0, ge=0, le=10)
    permanent: bool = False


FLAKY = register(Kind("TEST_FLAKY", FlakyPayload, max_attempts=3, retry=FAST_RETRY))


@handles(FLAKY.name)
class FlakyHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        if item.payload.get("permanent"):
            raise PermanentError("the order is gone")
        if item.attempts <= item.payload.get("fail_first", 0):
            raise RuntimeError(f"the gateway timed out (attempt {item.attempts})")
