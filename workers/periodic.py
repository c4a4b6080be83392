"""The one primitive every periodic loop of a worker process uses (heartbeat, sweep, schedules).

A ``PeriodicTask`` owns its own loop around a ready-made async operation and knows nothing of
what the operation does: the composition root builds the operation, chooses the schedule, the
timeout and the error policy, and hands them over. Each periodic responsibility gets its own
task; the runtime starts ``run()`` and watches it end, it never schedules single iterations.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from wqcore.logs import log_event

logger = logging.getLogger(__name__)

Mode = Literal["fixed_delay", "fixed_rate", "result_aware"]
ErrorPolicy = Literal["continue", "stop"]
Clock = Callable[[], float]
StopAwareSleep = Callable[[float, asyncio.Event], Awaitable[bool]]

_MODES: tuple[Mode, ...] = ("fixed_delay", "fixed_rate", "result_aware")
_POLICIES: tuple[ErrorPolicy, ...] = ("continue", "stop")


async def wait_or_stop(delay_s: float, stop: asyncio.Event) -> bool:
    """Wait ``delay_s`` seconds or until ``stop`` is set, whichever comes first.

    Returns True when stopped, so a loop never sleeps through a shutdown.
    """
    if stop.is_set():
        return True
    try:
        await asyncio.wait_for(stop.wait(), timeout=max(delay_s, 0.0))
    except TimeoutError:
        return stop.is_set()
    return True


def _check(
    mode: str,
    on_error: str,
    interval_s: float,
    timeout_s: float | None,
    failures_to_unready: int,
    error_delay_s: float | None,
) -> None:
    """A wrong argument of ``PeriodicTask`` raises ``ValueError`` naming it."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, not {mode!r}")
    if on_error not in _POLICIES:
        raise ValueError(f"on_error must be one of {_POLICIES}, not {on_error!r}")
    if not interval_s > 0:
        raise ValueError(f"interval_s must be positive, not {interval_s!r}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive or None, not {timeout_s!r}")
    if failures_to_unready < 1:
        raise ValueError(f"failures_to_unready must be at least 1, not {failures_to_unready}")
    if error_delay_s is not None and not error_delay_s >= 0:
        raise ValueError(f"error_delay_s must be >= 0 or None, not {error_delay_s!r}")


class PeriodicTask:
    """Run one operation periodically, one run at a time, until the stop event is set.

    ``fixed_delay`` waits the full interval after each run ends, so a slow run pushes the next
    one back. ``fixed_rate`` runs at ``start + k * interval_s`` on the monotonic clock; a run that
    overruns skips the slots it missed rather than bursting to catch up, so a stall never turns
    into a storm of back-to-back runs. ``result_aware`` waits ``delay_for(result)`` seconds
    after a run that returned ``result`` (0: run again at once), and ``error_delay_s`` after a
    failure or a timeout: a retry backoff kept apart from the working interval.

    ``is_failure(result)`` may declare a returned result a failure (work that was not done):
    it counts toward readiness like a raised error, without a traceback. Failures are logged on
    transitions only: the first of a streak (with its traceback), then readiness lost and
    regained, and the streak's length when it ends. A failure ``report(exc)`` takes (it returns
    True: another account logs it, the worker's outage account for a database that went away)
    is counted the same and logged by no line of this task's, not even its recovery.
    """

    def __init__(
        self,
        *,
        name: str,
        operation: Callable[[], Awaitable[object]],
        interval_s: float,
        mode: Mode,
        timeout_s: float | None,
        stop: asyncio.Event,
        on_error: ErrorPolicy,
        failures_to_unready: int = 1,
        delay_for: Callable[[Any], float] | None = None,
        error_delay_s: float | None = None,
        is_failure: Callable[[Any], bool] | None = None,
        report: Callable[[BaseException], bool] | None = None,
        clock: Clock = time.monotonic,
        sleep: StopAwareSleep | None = None,
    ) -> None:
        _check(mode, on_error, interval_s, timeout_s, failures_to_unready, error_delay_s)
        if (mode == "result_aware") != (delay_for is not None):
            raise ValueError("delay_for is required by mode='result_aware' and only by it")
        self.name = name
        self.interval_s = interval_s
        self.mode: Mode = mode
        self.timeout_s = timeout_s
        self.on_error: ErrorPolicy = on_error
        self.failures_to_unready = failures_to_unready
        self._operation = operation
        self._delay_for = delay_for
        self.error_delay_s = interval_s if error_delay_s is None else error_delay_s
        self._is_failure = is_failure
        self._report = report
        # Every failure of the current streak was another account's to log.
        self._streak_reported = False
        self._stop = stop
        self._clock = clock
        self._sleep: StopAwareSleep = sleep if sleep is not None else wait_or_stop
        self._ready = True
        self._in_flight = False
        self._looping = False
        self.last_success_at: float | None = None
        self.last_result: Any = None
        self.consecutive_failures = 0
        self.iterations = 0

    @property
    def ready(self) -> bool:
        """False once ``failures_to_unready`` runs in a row have failed; True again on a success."""
        return self._ready

    async def run(self) -> None:
        """Loop until the stop event is set; with ``on_error="stop"`` a failure ends it by raising.

        The first run starts at once (no startup delay unless the caller waits before calling).
        """
        if self._looping:
            # A second loop over the same task would double its rate and overlap its runs.
            raise RuntimeError(f"periodic task {self.name} is already running")
        self._looping = True
        try:
            if self.mode == "fixed_delay":
                await self._run_fixed_delay()
            elif self.mode == "fixed_rate":
                await self._run_fixed_rate()
            else:
                await self._run_result_aware()
        finally:
            self._looping = False

    async def _run_fixed_delay(self) -> None:
        while not self._stop.is_set():
            await self.run_once()
            if await self._sleep(self.interval_s, self._stop):
                return

    async def _run_result_aware(self) -> None:
        assert self._delay_for is not None
        while not self._stop.is_set():
            ok = await self.run_once()
            delay_s = self._delay_for(self.last_result) if ok else self.error_delay_s
            if delay_s > 0 and await self._sleep(delay_s, self._stop):
                return

    async def _run_fixed_rate(self) -> None:
        start = self._clock()
        slot = 0
        while not self._stop.is_set():
            await self.run_once()
            elapsed = self._clock() - start
            # The next slot still ahead of us: slot + 1 normally, later after an overrun.
            slot = max(slot + 1, math.ceil(elapsed / self.interval_s))
            delay_s = start + slot * self.interval_s - self._clock()
            if await self._sleep(max(delay_s, 0.0), self._stop):
                return

    async def run_once(self) -> bool:
        """Run the operation once with the timeout and the error policy applied.

        Returns True on success and False on a failure the policy lets pass (a raised error, a
        timeout, or a result ``is_failure`` declares one); with ``on_error="stop"`` a raised
        failure (or ``TimeoutError``) is raised instead. The result is kept in ``last_result``.
        Cancellation is never swallowed.
        """
        if self._in_flight:
            raise RuntimeError(f"periodic task {self.name} is already running an iteration")
        self._in_flight = True
        try:
            try:
                # asyncio.timeout cancels the operation and waits for it to finish unwinding, so
                # a timed-out run is fully over before the next one can start.
                async with asyncio.timeout(self.timeout_s) as deadline:
                    result = await self._operation()
            except Exception as exc:
                # The operation's own TimeoutError is an ordinary failure, not our timeout.
                timed_out = isinstance(exc, TimeoutError) and deadline.expired()
                self.last_result = None
                reported = self._report is not None and self._report(exc)
                self._failed(timed_out=timed_out, reported=reported)
                if self.on_error == "stop":
                    raise
                return False
            self.last_result = result
            if self._is_failure is not None and self._is_failure(result):
                self._failed(timed_out=False, raised=False)
                return False
            self._succeeded()
            return True
        finally:
            self._in_flight = False

    def _succeeded(self) -> None:
        self.iterations += 1
        self.last_success_at = self._clock()
        quiet, self._streak_reported = self._streak_reported, False
        if quiet:
            self.consecutive_failures = 0
            self._ready = True
            return
        if self.consecutive_failures:
            log_event(
                logger,
                logging.INFO,
                "periodic_recovered",
                task=self.name,
                failures=self.consecutive_failures,
            )
        self.consecutive_failures = 0
        if not self._ready:
            self._ready = True
            log_event(logger, logging.INFO, "periodic_ready", task=self.name)

    def _failed(self, *, timed_out: bool, raised: bool = True, reported: bool = False) -> None:
        """Count the failure; log it when it starts a streak (called inside the except block,
        for the traceback), at debug level while the streak goes on; not at all when another
        account logs it (``reported``)."""
        self.iterations += 1
        self.consecutive_failures += 1
        first = self.consecutive_failures == 1
        if first:
            self._streak_reported = reported
        if self._streak_reported:
            if not reported:
                # An error of another kind within an outage's streak: this task's to log.
                self._streak_reported = False
            else:
                if self.consecutive_failures >= self.failures_to_unready:
                    self._ready = False
                return
            first = True
        level = logging.ERROR if first else logging.DEBUG
        if timed_out:
            # The traceback of a timeout only shows asyncio internals; the numbers say it all.
            log_event(
                logger,
                level,
                "periodic_timeout",
                task=self.name,
                timeout_s=self.timeout_s,
                failures=self.consecutive_failures,
            )
        else:
            log_event(
                logger,
                level,
                "periodic_failed",
                exc_info=raised and first,
                task=self.name,
                failures=self.consecutive_failures,
            )
        if self._ready and self.consecutive_failures >= self.failures_to_unready:
            self._ready = False
            log_event(
                logger,
                logging.WARNING,
                "periodic_unready",
                task=self.name,
                failures=self.consecutive_failures,
            )
