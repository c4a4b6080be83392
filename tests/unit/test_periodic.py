"""The periodic-task primitive, on a controlled clock and a fake stop-aware sleep (no database).

Schedules are checked by the delays the loop asks the fake sleep for and the clock values at
which the operation starts; only the timeout and stop-promptness tests wait real milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import pytest

from workers.periodic import PeriodicTask, wait_or_stop
from wqcore.logs import event_text


class FakeTime:
    """A clock that moves only when told, and a stop-aware sleep that records what it was asked.

    The sleep advances the clock by the delay and sets the stop event after ``stop_after`` waits,
    which is how a test ends ``run()``.
    """

    def __init__(self, stop: asyncio.Event, stop_after: int) -> None:
        self.now = 0.0
        self.delays: list[float] = []
        self.stop = stop
        self.stop_after = stop_after

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay_s: float, stop: asyncio.Event) -> bool:
        assert stop is self.stop
        self.delays.append(delay_s)
        self.now += delay_s
        await asyncio.sleep(0)
        if len(self.delays) >= self.stop_after:
            stop.set()
        return stop.is_set()


def timed_operation(
    fake: FakeTime, durations_s: list[float], starts: list[float]
) -> Callable[[], Awaitable[None]]:
    """An operation that records when each run starts and takes the given (fake) time."""

    async def operation() -> None:
        starts.append(fake.now)
        fake.now += durations_s[len(starts) - 1]
        await asyncio.sleep(0)

    return operation


def make_task(
    operation: Callable[[], Awaitable[object]],
    *,
    stop: asyncio.Event,
    fake: FakeTime | None = None,
    **overrides: object,
) -> PeriodicTask:
    options: dict[str, object] = {
        "name": "heartbeat",
        "interval_s": 10.0,
        "mode": "fixed_delay",
        "timeout_s": None,
        "on_error": "continue",
    }
    if fake is not None:
        options.update(clock=fake.clock, sleep=fake.sleep)
    options.update(overrides)
    return PeriodicTask(operation=operation, stop=stop, **options)  # type: ignore[arg-type]


async def bounded[T](awaitable: Awaitable[T], limit_s: float = 1.0) -> T:
    """Await with a guard, so a broken timeout fails the test instead of hanging it."""
    try:
        async with asyncio.timeout(limit_s) as guard:
            return await awaitable
    except TimeoutError:
        if guard.expired():
            raise AssertionError(f"still running after {limit_s} s") from None
        raise


def records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().split(" ", 1)[0] == event]


# --- schedules -----------------------------------------------------------------------------


def test_fixed_delay_waits_the_full_interval_after_each_run_ends() -> None:
    async def scenario() -> tuple[list[float], list[float], PeriodicTask]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=3)
        starts: list[float] = []
        task = make_task(
            timed_operation(fake, [3.0, 7.0, 1.0], starts), stop=stop, fake=fake, interval_s=10.0
        )
        await task.run()
        return starts, fake.delays, task

    starts, delays, task = asyncio.run(scenario())
    assert delays == [10.0, 10.0, 10.0]
    # Each start is the previous end plus the interval: 0 -> ends 3 -> 13 -> ends 20 -> 30.
    assert starts == [0.0, 13.0, 30.0]
    assert task.iterations == 3
    assert task.last_success_at == 31.0


def test_fixed_rate_keeps_its_cadence_whatever_each_run_takes() -> None:
    async def scenario() -> tuple[list[float], list[float]]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=3)
        starts: list[float] = []
        task = make_task(
            timed_operation(fake, [2.0, 4.0, 1.0], starts),
            stop=stop,
            fake=fake,
            mode="fixed_rate",
            interval_s=10.0,
        )
        await task.run()
        return starts, fake.delays

    starts, delays = asyncio.run(scenario())
    assert starts == [0.0, 10.0, 20.0]
    assert delays == [8.0, 6.0, 9.0]


def test_fixed_rate_skips_missed_slots_after_an_overrun_instead_of_bursting() -> None:
    async def scenario() -> tuple[list[float], list[float]]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=4)
        starts: list[float] = []
        # The second run (slot 10) takes 25 s and ends at 35: slots 20 and 30 are gone.
        task = make_task(
            timed_operation(fake, [2.0, 25.0, 1.0, 1.0], starts),
            stop=stop,
            fake=fake,
            mode="fixed_rate",
            interval_s=10.0,
        )
        await task.run()
        return starts, fake.delays

    starts, delays = asyncio.run(scenario())
    assert starts == [0.0, 10.0, 40.0, 50.0]  # no runs at 20 or 30, no back-to-back catch-up
    assert delays == [8.0, 5.0, 9.0, 9.0]
    assert all(d > 0 for d in delays)


def test_fixed_rate_overrun_ending_on_a_slot_runs_that_slot_without_waiting() -> None:
    async def scenario() -> tuple[list[float], list[float]]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=2)
        starts: list[float] = []
        task = make_task(
            timed_operation(fake, [20.0, 1.0], starts),
            stop=stop,
            fake=fake,
            mode="fixed_rate",
            interval_s=10.0,
        )
        await task.run()
        return starts, fake.delays

    starts, delays = asyncio.run(scenario())
    assert starts == [0.0, 20.0]  # slot 10 skipped, slot 20 due right now
    assert delays == [0.0, 9.0]


def test_fixed_rate_schedules_from_the_clock_at_start_not_from_zero() -> None:
    async def scenario() -> tuple[list[float], list[float]]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=2)
        fake.now = 1000.5
        starts: list[float] = []
        task = make_task(
            timed_operation(fake, [0.5, 0.5], starts),
            stop=stop,
            fake=fake,
            mode="fixed_rate",
            interval_s=2.0,
        )
        await task.run()
        return starts, fake.delays

    starts, delays = asyncio.run(scenario())
    assert starts == [1000.5, 1002.5]
    assert delays == [1.5, 1.5]


@pytest.mark.parametrize("mode", ["fixed_delay", "fixed_rate"])
def test_runs_never_overlap(mode: str) -> None:
    async def scenario() -> tuple[int, int]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=5)
        active = 0
        most_active = 0
        calls = 0

        async def operation() -> None:
            nonlocal active, most_active, calls
            calls += 1
            active += 1
            most_active = max(most_active, active)
            fake.now += 25.0  # overruns the interval every time
            for _ in range(3):
                await asyncio.sleep(0)
            active -= 1

        task = make_task(operation, stop=stop, fake=fake, mode=mode, interval_s=10.0)
        await task.run()
        return calls, most_active

    calls, most_active = asyncio.run(scenario())
    assert calls == 5
    assert most_active == 1


def test_a_second_run_once_while_one_is_in_flight_is_refused() -> None:
    async def scenario() -> tuple[int, bool]:
        stop = asyncio.Event()
        release = asyncio.Event()
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1
            await release.wait()

        task = make_task(operation, stop=stop)
        first = asyncio.create_task(task.run_once())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already running"):
            await asyncio.wait_for(task.run_once(), timeout=1.0)  # fails, not hangs, if allowed
        release.set()
        return calls, await first

    calls, first_result = asyncio.run(scenario())
    assert calls == 1
    assert first_result is True


def test_a_second_run_loop_is_refused() -> None:
    async def scenario() -> int:
        stop = asyncio.Event()
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1

        task = make_task(operation, stop=stop, interval_s=60.0)
        loop = asyncio.create_task(task.run())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already running"):
            await asyncio.wait_for(task.run(), timeout=1.0)
        stop.set()
        await asyncio.wait_for(loop, timeout=10.0)
        return calls

    assert asyncio.run(scenario()) == 1


# --- timeout -------------------------------------------------------------------------------


def test_timeout_cancels_the_operation_fully_and_counts_as_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []

    async def scenario() -> tuple[bool, PeriodicTask]:
        stop = asyncio.Event()

        async def operation() -> None:
            events.append("start")
            try:
                await asyncio.Event().wait()  # never finishes on its own
            except asyncio.CancelledError:
                events.append("cancelled")
                raise
            finally:
                await asyncio.sleep(0)  # cleanup that itself awaits must still complete
                events.append("cleaned")

        task = make_task(operation, stop=stop, timeout_s=0.01)
        result = await bounded(task.run_once())
        events.append("returned")
        return result, task

    with caplog.at_level(logging.INFO, logger="workers.periodic"):
        result, task = asyncio.run(scenario())
    assert result is False
    assert events == ["start", "cancelled", "cleaned", "returned"]
    assert task.consecutive_failures == 1
    assert task.iterations == 1
    assert task.last_success_at is None
    assert task.ready is False
    timeouts = records(caplog, "periodic_timeout")
    assert len(timeouts) == 1
    assert event_text(timeouts[0]) == 'periodic_timeout task="heartbeat" timeout_s=0.01 failures=1'


def test_after_a_timeout_the_loop_starts_the_next_run_only_once_the_last_is_cancelled() -> None:
    events: list[str] = []

    async def scenario() -> PeriodicTask:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=2)
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1
            n = calls
            events.append(f"start{n}")
            try:
                if n == 1:
                    await asyncio.Event().wait()
            finally:
                events.append(f"end{n}")

        task = make_task(operation, stop=stop, fake=fake, timeout_s=0.01, failures_to_unready=5)
        await bounded(task.run())
        return task

    task = asyncio.run(scenario())
    assert events == ["start1", "end1", "start2", "end2"]
    assert task.iterations == 2
    assert task.consecutive_failures == 0
    assert task.ready is True


def test_the_operations_own_timeout_error_is_an_ordinary_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def operation() -> None:
        raise TimeoutError("upstream socket timed out")

    async def scenario() -> bool:
        task = make_task(operation, stop=asyncio.Event(), timeout_s=30.0)
        return await task.run_once()

    with caplog.at_level(logging.INFO, logger="workers.periodic"):
        assert asyncio.run(scenario()) is False
    assert len(records(caplog, "periodic_failed")) == 1
    assert records(caplog, "periodic_timeout") == []


# --- error policy --------------------------------------------------------------------------


def test_on_error_continue_logs_once_and_carries_on_at_the_next_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> tuple[int, list[float], PeriodicTask]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=3)
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise ValueError("boom")

        task = make_task(operation, stop=stop, fake=fake, on_error="continue", interval_s=10.0)
        await task.run()
        return calls, fake.delays, task

    with caplog.at_level(logging.INFO, logger="workers.periodic"):
        calls, delays, task = asyncio.run(scenario())
    assert calls == 3
    assert delays == [10.0, 10.0, 10.0]  # the failure did not change the interval
    assert task.iterations == 3
    assert task.consecutive_failures == 0
    failed = records(caplog, "periodic_failed")
    assert len(failed) == 1
    assert failed[0].levelno == logging.ERROR
    assert failed[0].exc_info is not None and isinstance(failed[0].exc_info[1], ValueError)
    assert event_text(failed[0]) == 'periodic_failed task="heartbeat" failures=1'


def test_on_error_stop_logs_once_and_reraises_out_of_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    boom = ValueError("boom")

    async def scenario() -> tuple[int, list[float], PeriodicTask]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=10)
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise boom

        task = make_task(operation, stop=stop, fake=fake, on_error="stop")
        with pytest.raises(ValueError) as raised:
            await task.run()
        assert raised.value is boom
        return calls, fake.delays, task

    with caplog.at_level(logging.INFO, logger="workers.periodic"):
        calls, delays, task = asyncio.run(scenario())
    assert calls == 2
    assert delays == [10.0]  # no further wait, no further run
    assert task.consecutive_failures == 1
    assert task.ready is False
    assert len(records(caplog, "periodic_failed")) == 1


def test_run_once_applies_the_timeout_and_the_policy() -> None:
    async def hang() -> None:
        await asyncio.Event().wait()

    async def fail() -> None:
        raise KeyError("missing")

    async def scenario() -> None:
        stop = asyncio.Event()
        lenient = make_task(hang, stop=stop, timeout_s=0.01, on_error="continue")
        assert await bounded(lenient.run_once()) is False
        assert lenient.consecutive_failures == 1

        strict = make_task(hang, stop=stop, timeout_s=0.01, on_error="stop")
        with pytest.raises(TimeoutError):
            await bounded(strict.run_once())
        assert strict.consecutive_failures == 1

        strict_fail = make_task(fail, stop=stop, on_error="stop")
        with pytest.raises(KeyError):
            await strict_fail.run_once()

        lenient_fail = make_task(fail, stop=stop, on_error="continue")
        assert await lenient_fail.run_once() is False
        assert lenient_fail.iterations == 1

    asyncio.run(scenario())


def test_run_once_on_success_records_the_clock_and_returns_true() -> None:
    async def scenario() -> tuple[bool, PeriodicTask]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=1)
        fake.now = 42.0

        async def operation() -> str:
            fake.now += 1.5
            return "no work"  # no work is a success, whatever the result says

        task = make_task(operation, stop=stop, fake=fake)
        return await task.run_once(), task

    result, task = asyncio.run(scenario())
    assert result is True
    assert task.last_success_at == 43.5
    assert task.iterations == 1
    assert task.consecutive_failures == 0


# --- readiness -----------------------------------------------------------------------------


def test_readiness_turns_false_after_n_failures_and_true_after_one_success(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcomes = [False, False, False, False, True, True, False]

    async def scenario() -> tuple[list[bool], list[int], PeriodicTask]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=1)
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1
            fake.now += 1.0
            if not outcomes[calls - 1]:
                raise RuntimeError(f"failure {calls}")

        task = make_task(operation, stop=stop, fake=fake, failures_to_unready=3)
        ready: list[bool] = []
        failures: list[int] = []
        for _ in outcomes:
            await task.run_once()
            ready.append(task.ready)
            failures.append(task.consecutive_failures)
        return ready, failures, task

    with caplog.at_level(logging.INFO, logger="workers.periodic"):
        ready, failures, task = asyncio.run(scenario())
    assert ready == [True, True, False, False, True, True, True]
    assert failures == [1, 2, 3, 4, 0, 0, 1]
    assert task.last_success_at == 6.0
    assert task.iterations == 7
    unready = records(caplog, "periodic_unready")
    assert [event_text(r) for r in unready] == ['periodic_unready task="heartbeat" failures=3']
    assert unready[0].levelno == logging.WARNING
    assert [event_text(r) for r in records(caplog, "periodic_ready")] == [
        'periodic_ready task="heartbeat"'
    ]
    # Transitions only: the first failure of each streak (with its traceback), readiness lost
    # and regained, and the streak's end; no line for the failures in between or a success.
    failed = records(caplog, "periodic_failed")
    assert [event_text(r) for r in failed] == [
        'periodic_failed task="heartbeat" failures=1',
        'periodic_failed task="heartbeat" failures=1',
    ]
    assert all(r.exc_info for r in failed)
    assert [event_text(r) for r in records(caplog, "periodic_recovered")] == [
        'periodic_recovered task="heartbeat" failures=4'
    ]
    assert len(caplog.records) == 5


def test_ready_at_start_and_default_threshold_is_one_failure() -> None:
    async def fail() -> None:
        raise RuntimeError("down")

    async def scenario() -> tuple[bool, bool]:
        task = make_task(fail, stop=asyncio.Event())
        before = task.ready
        await task.run_once()
        return before, task.ready

    assert asyncio.run(scenario()) == (True, False)


# --- stop and cancellation -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["fixed_delay", "fixed_rate"])
def test_stop_set_during_a_wait_ends_run_promptly(mode: str) -> None:
    async def scenario() -> tuple[int, float]:
        stop = asyncio.Event()
        ran = asyncio.Event()
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1
            ran.set()

        task = make_task(operation, stop=stop, mode=mode, interval_s=60.0)  # the real sleep
        loop = asyncio.create_task(task.run())
        await ran.wait()
        await asyncio.sleep(0.005)  # the loop is now inside its 60 s wait
        began = time.monotonic()
        stop.set()
        await asyncio.wait_for(loop, timeout=10.0)
        return calls, time.monotonic() - began

    calls, took_s = asyncio.run(scenario())
    assert calls == 1
    assert took_s < 10  # not the 60 s wait


def test_run_does_nothing_when_stop_is_already_set() -> None:
    async def scenario() -> tuple[int, list[float]]:
        stop = asyncio.Event()
        stop.set()
        fake = FakeTime(stop, stop_after=1)
        calls = 0

        async def operation() -> None:
            nonlocal calls
            calls += 1

        await make_task(operation, stop=stop, fake=fake).run()
        return calls, fake.delays

    assert asyncio.run(scenario()) == (0, [])


def test_cancelled_error_from_the_operation_propagates_and_is_not_a_failure() -> None:
    async def operation() -> None:
        raise asyncio.CancelledError

    async def scenario() -> PeriodicTask:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=5)
        task = make_task(operation, stop=stop, fake=fake, on_error="continue", timeout_s=5.0)
        with pytest.raises(asyncio.CancelledError):
            await task.run()
        assert fake.delays == []
        return task

    task = asyncio.run(scenario())
    assert task.consecutive_failures == 0
    assert task.iterations == 0
    assert task.ready is True


def test_cancelling_run_cancels_the_running_operation_and_ends_the_task() -> None:
    events: list[str] = []

    async def scenario() -> bool:
        stop = asyncio.Event()
        started = asyncio.Event()

        async def operation() -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                events.append("cancelled")
                raise

        task = make_task(operation, stop=stop, timeout_s=30.0, on_error="continue")
        loop = asyncio.create_task(task.run())
        await started.wait()
        loop.cancel()
        await asyncio.wait({loop}, timeout=1.0)  # bounded, so a swallowed cancel fails the test
        cancelled = loop.done() and loop.cancelled()
        if not loop.done():
            stop.set()
            loop.cancel()
        return cancelled

    assert asyncio.run(scenario()) is True
    assert events == ["cancelled"]


# --- the default stop-aware wait and construction ------------------------------------------


def test_default_wait_returns_false_after_the_delay_and_true_when_stopped() -> None:
    async def scenario() -> tuple[bool, bool, bool, float]:
        stop = asyncio.Event()
        elapsed = await wait_or_stop(0.01, stop)
        zero = await wait_or_stop(0.0, stop)
        asyncio.get_running_loop().call_later(0.01, stop.set)
        began = time.monotonic()
        stopped = await bounded(wait_or_stop(60.0, stop), limit_s=10.0)
        return elapsed, zero, stopped, time.monotonic() - began

    elapsed, zero, stopped, took_s = asyncio.run(scenario())
    assert (elapsed, zero, stopped) == (False, False, True)
    assert took_s < 10  # not the 60 s wait


def test_default_wait_returns_at_once_when_already_stopped() -> None:
    async def scenario() -> bool:
        stop = asyncio.Event()
        stop.set()
        return await bounded(wait_or_stop(60.0, stop), limit_s=0.5)

    assert asyncio.run(scenario()) is True


def test_mode_and_policy_have_no_defaults() -> None:
    async def operation() -> None:
        return None

    with pytest.raises(TypeError):
        PeriodicTask(  # type: ignore[call-arg]
            name="x",
            operation=operation,
            interval_s=1.0,
            timeout_s=None,
            stop=asyncio.Event(),
            on_error="continue",
        )
    with pytest.raises(TypeError):
        PeriodicTask(  # type: ignore[call-arg]
            name="x",
            operation=operation,
            interval_s=1.0,
            mode="fixed_rate",
            timeout_s=None,
            stop=asyncio.Event(),
        )


@pytest.mark.parametrize(
    "overrides",
    [
        {"mode": "fixed"},
        {"on_error": "ignore"},
        {"interval_s": 0.0},
        {"timeout_s": 0.0},
        {"failures_to_unready": 0},
    ],
)
def test_invalid_settings_are_refused(overrides: dict[str, object]) -> None:
    async def operation() -> None:
        return None

    with pytest.raises(ValueError):
        make_task(operation, stop=asyncio.Event(), **overrides)


# --- result-aware delay ---------------------------------------------------------------------


def test_result_aware_waits_what_each_result_asks_and_retries_failures_apart() -> None:
    """Each result picks the next delay (0: run again at once); a failure waits the separate
    error delay, never the working interval."""
    outcomes: list[object] = ["more", "idle", RuntimeError("down"), "idle"]

    async def scenario() -> tuple[list[float], list[float]]:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=3)
        starts: list[float] = []

        async def operation() -> object:
            starts.append(fake.now)
            outcome = outcomes[len(starts) - 1]
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        task = make_task(
            operation,
            stop=stop,
            fake=fake,
            mode="result_aware",
            delay_for=lambda result: 0.0 if result == "more" else 10.0,
            error_delay_s=2.5,
        )
        await bounded(task.run())
        return fake.delays, starts

    delays, starts = asyncio.run(scenario())
    assert delays == [10.0, 2.5, 10.0]  # "more" ran again at once: no wait was asked for
    assert starts == [0.0, 0.0, 10.0, 12.5]


def test_a_result_declared_a_failure_counts_toward_readiness_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> PeriodicTask:
        stop = asyncio.Event()
        fake = FakeTime(stop, stop_after=1)

        async def operation() -> bool:
            return False  # the renewal did not happen

        task = make_task(
            operation,
            stop=stop,
            fake=fake,
            mode="result_aware",
            delay_for=lambda ok: 1.0,
            is_failure=lambda ok: not ok,
            failures_to_unready=2,
        )
        for _ in range(2):
            assert await task.run_once() is False
        return task

    with caplog.at_level(logging.DEBUG, logger="workers.periodic"):
        task = asyncio.run(scenario())
    assert task.consecutive_failures == 2 and task.ready is False
    assert task.last_result is False
    failed = records(caplog, "periodic_failed")
    assert [r.levelno for r in failed] == [logging.ERROR, logging.DEBUG]
    assert not any(r.exc_info for r in failed)


def test_result_aware_needs_its_table_and_only_it_does() -> None:
    async def noop() -> None:
        return None

    stop = asyncio.Event()
    with pytest.raises(ValueError, match="delay_for"):
        make_task(noop, stop=stop, mode="result_aware")
    with pytest.raises(ValueError, match="delay_for"):
        make_task(noop, stop=stop, mode="fixed_delay", delay_for=lambda r: 1.0)


# --- failures another account logs (issue 21) ------------------------------------------------


def test_a_failure_another_account_reports_is_counted_but_logs_no_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sweep's lock attempt meeting a server that went away (AdminShutdown) is the
    outage's to log: the task counts it and goes unready, but says nothing, nor when it ends."""
    import psycopg

    outcomes = [psycopg.errors.AdminShutdown("terminating connection"), None, None]
    reported: list[BaseException] = []

    async def operation() -> None:
        error = outcomes.pop(0)
        if error is not None:
            raise error

    def report(exc: BaseException) -> bool:
        reported.append(exc)
        return isinstance(exc, psycopg.OperationalError)

    async def main() -> PeriodicTask:
        stop = asyncio.Event()
        task = make_task(operation, stop=stop, report=report)
        assert await task.run_once() is False
        assert task.consecutive_failures == 1 and not task.ready
        assert await task.run_once() is True
        assert task.consecutive_failures == 0 and task.ready
        return task

    with caplog.at_level(logging.DEBUG, logger="workers.periodic"):
        asyncio.run(main())
    assert len(reported) == 1
    assert caplog.records == [], [r.getMessage() for r in caplog.records]


def test_an_error_the_account_does_not_take_is_still_the_tasks_to_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def operation() -> None:
        raise ValueError("a bug in the sweep")

    async def main() -> None:
        task = make_task(operation, stop=asyncio.Event(), report=lambda exc: False)
        assert await task.run_once() is False

    with caplog.at_level(logging.INFO, logger="workers.periodic"):
        asyncio.run(main())
    [failed] = records(caplog, "periodic_failed")
    assert failed.exc_info is not None  # its traceback: a bug is worth one
