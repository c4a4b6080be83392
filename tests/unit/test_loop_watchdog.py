"""The loop watchdog, with a controlled clock and a loop that answers its probes when told."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest
from django.core.exceptions import ImproperlyConfigured
from prometheus_client import REGISTRY

from tests.helpers import queue_settings
from workers.config import WorkerSettings
from workers.watchdog import LoopWatchdog
from wqcore.logs import event_name, event_text


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Loop:
    """Stands in for the worker's loop: keeps the probes until ``run`` (the loop running)."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []
        self.closed = False

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        if self.closed:
            raise RuntimeError("Event loop is closed")
        self.pending.append(callback)

    def run(self) -> None:
        pending, self.pending = self.pending, []
        for callback in pending:
            callback()


def _watchdog(clock: Clock, loop: Loop, described: list[int]) -> LoopWatchdog:
    def describe() -> dict[str, str]:
        described.append(1)
        return {"items": "abc:TEST_KIND"}

    return LoopWatchdog(loop, 1.0, describe=describe, loop_thread=0, clock=clock)  # type: ignore[arg-type]


def _check(watchdog: LoopWatchdog, clock: Clock, seconds: float) -> None:
    clock.now += seconds
    asyncio.run(watchdog.check())


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_a_loop_that_answers_is_never_reported(caplog: pytest.LogCaptureFixture) -> None:
    clock, loop, described = Clock(), Loop(), []
    watchdog = _watchdog(clock, loop, described)
    for _ in range(20):
        _check(watchdog, clock, watchdog.interval_s)
        loop.run()
    assert not watchdog.blocked and watchdog.episodes == 0 and described == []
    assert "worker_loop_blocked" not in caplog.text
    assert len(loop.pending) == 0  # one probe at a time, each answered


def test_a_blocked_loop_is_reported_once_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="workers.watchdog")
    clock, loop, described = Clock(), Loop(), []
    watchdog = _watchdog(clock, loop, described)
    counted = _sample("workqueue_worker_loop_blocked_total")
    observed = _sample("workqueue_worker_loop_blocked_seconds_count")
    _check(watchdog, clock, 0)  # the first probe goes out; the loop does not run from here
    _check(watchdog, clock, 0.9)
    assert not watchdog.blocked
    for _ in range(30):  # 7.5 s blocked, checked every quarter second
        _check(watchdog, clock, 0.25)
    assert watchdog.blocked and watchdog.episodes == 1 and described == [1]
    assert _sample("workqueue_worker_loop_blocked_total") == counted + 1
    assert len(loop.pending) == 1  # no probes pile up on a blocked loop
    [warning] = [event_text(r) for r in caplog.records if event_name(r) == "worker_loop_blocked"]
    assert "blocked_s=1.1" in warning and 'items="abc:TEST_KIND"' in warning
    assert "run.in_thread" in warning
    clock.now += 0.1
    loop.run()  # the loop runs again
    _check(watchdog, clock, 0.15)
    assert not watchdog.blocked
    assert _sample("workqueue_worker_loop_blocked_seconds_count") == observed + 1
    [ended] = [event_text(r) for r in caplog.records if event_name(r) == "worker_loop_unblocked"]
    assert "blocked_s=8.5" in ended and 'items="abc:TEST_KIND"' in ended
    # The next block is a new episode.
    for _ in range(6):
        _check(watchdog, clock, 0.25)
    assert watchdog.episodes == 2 and described == [1, 1]


def test_a_stopped_process_is_not_a_blocked_loop() -> None:
    """SIGSTOP stops the watchdog's thread too: its next check comes late, and the probe it
    sent before says nothing about the loop; it asks again."""
    clock, loop, described = Clock(), Loop(), []
    watchdog = _watchdog(clock, loop, described)
    _check(watchdog, clock, 0)
    _check(watchdog, clock, 5.0)  # five seconds late: the process was stopped
    assert not watchdog.blocked
    loop.run()
    _check(watchdog, clock, 0.25)
    assert not watchdog.blocked and watchdog.episodes == 0
    # A loop that then stays blocked is still reported, a warning's time later.
    for _ in range(5):
        _check(watchdog, clock, 0.25)
    assert watchdog.blocked and watchdog.episodes == 1


def test_a_closed_loop_ends_the_probes_quietly() -> None:
    clock, loop, described = Clock(), Loop(), []
    watchdog = _watchdog(clock, loop, described)
    loop.closed = True
    _check(watchdog, clock, 0)  # no RuntimeError out of the periodic task


def test_it_checks_every_quarter_of_the_warning_and_needs_one() -> None:
    watchdog = LoopWatchdog(Loop(), 2.0, describe=str)  # type: ignore[arg-type]
    assert watchdog.interval_s == pytest.approx(0.5)
    with pytest.raises(ValueError, match="warn_s"):
        LoopWatchdog(Loop(), 0, describe=str)  # type: ignore[arg-type]


def test_the_setting_is_read_from_the_queues_settings_and_checked() -> None:
    assert WorkerSettings.from_settings(("NOOP",)).loop_blocked_warn_s == 1.0
    with queue_settings(WORKER_LOOP_BLOCKED_WARN_S=2.5):
        assert WorkerSettings.from_settings(("NOOP",)).loop_blocked_warn_s == 2.5
    with queue_settings(WORKER_LOOP_BLOCKED_WARN_S=-1):
        with pytest.raises(
            ImproperlyConfigured,
            match=r"WORKQUEUE\['WORKER_LOOP_BLOCKED_WARN_S'\]: Input should be greater than",
        ):
            WorkerSettings.from_settings(("NOOP",))
