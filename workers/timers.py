"""The worker's timers, each on the periodic primitive (``periodic.py``): its heartbeat, its
progress writes, its lease renewals and loop watchdog (on the keeper's thread), the ready
ring's turns, its sweep and rescue passes. Each is made from the worker it serves; ``Worker``
starts them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from workers.periodic import PeriodicTask
from workers.sweep.rescue import ask_delay_s
from workers.sweep.sweeper import rescue_once, sweep_once
from workers.watchdog import LoopWatchdog
from workqueue import runtime

if TYPE_CHECKING:
    from workers.config import WorkerSettings
    from workers.outage import Outage
    from workers.reporting import Reporter
    from workers.running import Runner
    from workers.sweep.config import SweepSettings


class Worker(Protocol):
    """What the timers read of the worker they serve (``workers.worker.Worker``), named here
    so this module does not import the one that starts it."""

    settings: WorkerSettings
    sweep_settings: SweepSettings
    outage: Outage
    reporter: Reporter
    runner: Runner
    stopped: asyncio.Event

    async def heartbeat(self) -> None: ...

    async def in_maintenance_thread[T](self, fn: Callable[[], T]) -> T: ...


def heartbeat_task(worker: Worker) -> PeriodicTask:
    s = worker.settings
    return PeriodicTask(
        name="heartbeat",
        operation=worker.heartbeat,
        interval_s=s.heartbeat_interval_s,
        mode="fixed_rate",
        # The beat is in memory; the publish inside is bounded on its own (_publish).
        timeout_s=None,
        stop=worker.stopped,
        on_error="continue",
    )


def progress_task(worker: Worker) -> PeriodicTask:
    """Writes what running handlers reported, each item at most once per interval."""
    reporter = worker.reporter
    return PeriodicTask(
        name="progress",
        operation=reporter.flush_due,
        interval_s=reporter.tick_s,
        mode="fixed_rate",
        # A write hung on a database that does not answer gives way to the next.
        timeout_s=max(reporter.interval_s, worker.settings.renew_timeout_s or 5.0),
        stop=worker.stopped,
        on_error="continue",
        report=lambda exc: worker.outage.failed("progress", exc),
    )


def lease_task(worker: Worker, stop: asyncio.Event) -> PeriodicTask:
    keeper = worker.runner.leases
    return PeriodicTask(
        name="lease_keeper",
        operation=keeper.renew_once,
        interval_s=keeper.interval_s,
        mode="result_aware",
        # A failed renewal is retried sooner: half the lease is the whole budget.
        delay_for=lambda renewed: keeper.interval_s if renewed else keeper.retry_s,
        error_delay_s=keeper.retry_s,
        # Each renewal is bounded by its own timeout inside renew_once.
        timeout_s=None,
        stop=stop,
        on_error="continue",
    )


def watchdog_task(worker: Worker, watchdog: LoopWatchdog, stop: asyncio.Event) -> PeriodicTask:
    return PeriodicTask(
        name="loop_watchdog",
        operation=watchdog.check,
        interval_s=watchdog.interval_s,
        mode="fixed_rate",
        timeout_s=None,  # never waits: it reads two clocks and sends a probe
        stop=stop,
        on_error="continue",
    )


def sweep_task(worker: Worker) -> PeriodicTask:
    """The sweep's passes."""
    sweep = worker.sweep_settings
    return PeriodicTask(
        name="sweep",
        operation=lambda: worker.in_maintenance_thread(
            lambda: sweep_once(sweep, outage=worker.outage)
        ),
        interval_s=sweep.interval_s,
        mode="fixed_delay",
        timeout_s=sweep.timeout_s,
        stop=worker.stopped,
        on_error="continue",
        # The lock attempt meeting a server that went away is the outage's to log.
        report=lambda exc: worker.outage.failed("sweep", exc),
    )


def ring_task(worker: Worker) -> PeriodicTask:
    """Offers to turn the ready ring (``workqueue/ready.py``) every ``READY_ROTATE_S``, in
    every worker whether it sweeps or not: the claim reads the ring, and an item due later
    reaches it only by a turn. One turn at a time across the fleet (the ring's mutex); the
    others return at once."""
    return PeriodicTask(
        name="ready_ring",
        operation=runtime.arotate_ready,
        interval_s=worker.settings.ready_rotate_s,
        mode="fixed_delay",
        timeout_s=max(worker.settings.ready_rotate_s * 10, 10.0),
        stop=worker.stopped,
        on_error="continue",
        report=lambda exc: worker.outage.failed("ready_ring", exc),
    )


def rescue_task(worker: Worker) -> PeriodicTask:
    """The rescue alone, on its own timer: it asks for the look the less often the larger the
    fleet (``workers.sweep.rescue.ask_delay_s``)."""
    sweep = worker.sweep_settings
    return PeriodicTask(
        name="rescue",
        operation=lambda: worker.in_maintenance_thread(
            lambda: rescue_once(sweep, outage=worker.outage)
        ),
        interval_s=sweep.rescue_interval_s,
        mode="result_aware",
        delay_for=lambda done: ask_delay_s(sweep, done.results.get("rescue")),
        timeout_s=sweep.timeout_s,
        stop=worker.stopped,
        on_error="continue",
        report=lambda exc: worker.outage.failed("sweep", exc),
    )
