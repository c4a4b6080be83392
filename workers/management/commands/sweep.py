"""manage.py sweep: the queue's maintenance on a timer (or one pass with --once)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from json import dumps
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from workers import eager
from workers.listen import Listener
from workers.outage import Outage, fold_driver_warnings
from workers.periodic import PeriodicTask
from workers.relayer import CHANNEL as OUTBOX_CHANNEL
from workers.relayer import Relayer
from workers.schedules import too_fine
from workers.sweep.config import SweepSettings
from workers.sweep.sweeper import STEPS, PassResult, close_lock, rescue_once, sweep_once
from workqueue.runtime import startup_problem
from wqcore.appname import name_connections
from wqcore.conf import effective
from wqcore.terminal import Progress

# What each step's result means, for people: the step's own words before its counts.
STEP_WORDS = {
    "rescue": "gone workers' items handed back",
    "requeue_stale": "stale claims handed back",
    "rotate_ready": "the ready ring turned (promoted, adopted, slots emptied)",
    "relay_outbox": "outbox rows relayed",
    "purge_outbox": "relayed outbox rows purged",
    "purge_items": "finished items purged",
    "purge_sessions": "expired sessions purged",
    "purge_request_keys": "stored Idempotency-Key answers purged",
    "enqueue_schedules": "schedule ticks enqueued",
    "roll_up_minutes": "attempts rolled up for the gauges page's charts",
    "keep_minutes": "the gauges page's minutes: days made ahead, days past the retention dropped",
    "purge_rate_buckets": "idle rate-limit buckets purged",
}


def step_values(result: Any) -> dict[str, Any]:
    """A step's result as plain values (``--json``, and the human lines): a count, a named
    tuple's or dataclass's fields."""
    if isinstance(result, bool) or result is None:
        return {"value": result}
    if isinstance(result, int | float):
        return {"count": result}
    if hasattr(result, "_asdict"):
        return dict(result._asdict())
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        # The fields a result shows (``repr=False`` ones, such as the moved items, are not
        # counts).
        return {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.repr}
    return {"value": str(result)}


def pass_values(result: PassResult | None) -> dict[str, Any]:
    """One pass as one JSON object: each step's values, the failed steps, how long it took
    (``skipped``: another sweeper held the lock, nothing ran)."""
    if result is None:
        return {"skipped": True, "steps": {}, "failed": [], "took_s": 0.0}
    return {
        "skipped": False,
        "steps": {name: step_values(value) for name, value in result.results.items()},
        "failed": list(result.failed),
        "took_s": round(result.took_s, 3),
    }


def human(result: PassResult | None) -> list[str]:
    """One pass for people: a line per step saying what it did, then the pass's time."""
    if result is None:
        return ["sweep skipped: another sweeper holds the lock (nothing ran)"]
    lines = []
    for name, value in result.results.items():
        values = step_values(value)
        if list(values) == ["count"]:
            said = str(values["count"])
        else:
            said = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items())
        lines.append(f"{name}: {STEP_WORDS.get(name, 'done')}: {said}")
    for name in result.failed:
        lines.append(f"{name}: FAILED (the log says why; the other steps ran)")
    lines.append(f"sweep took {result.took_s:.3f} s")
    return lines


class Command(BaseCommand):
    help = (
        "Run the queue's maintenance: hand back the items of workers whose process is gone "
        "(their liveness lock free; also on a timer of its own, SWEEP_RESCUE_INTERVAL_S), "
        "requeue stale items (dead-lettering those whose attempts are spent), relay the outbox "
        "(also at once on each outbox_pending notice), purge "
        "relayed outbox rows, done items and dead letters (and discarded and cancelled items) "
        "past their retention, expired sessions and the API's stored Idempotency-Key answers "
        "(IDEMPOTENCY_KEY_RETENTION_S), enqueue the declared schedules' due ticks (manage.py "
        "schedules lists them), roll the attempts up into the gauges page's minutes (a "
        "partition a day, dropped whole after ROLLUP_RETENTION_S), and read the gauges. One "
        "sweeper acts at a time across hosts (a mutex only the system login may take). Steps: "
        + ", ".join(name for name, _ in STEPS)
        + ". The WORKQUEUE settings it reads are listed below, with the values in effect."
    )
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = "settings (WORKQUEUE[...]):\n" + effective(
            (
                "SWEEP_",
                "ITEM_",
                "DEAD_LETTER_",
                "OUTBOX_",
                "IDEMPOTENCY_",
                "ROLLUP_",
                "SCHEDULE_",
                "LOG_",
            )
        )
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once", action="store_true", help="run one pass, print what each step did, and exit"
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="with --once: print the pass as one JSON object (each step's counts), for "
            "scripts (and no progress: on a terminal, stderr shows the step it is in)",
        )

    def handle(self, *args: Any, once: bool = False, json: bool = False, **options: Any) -> None:
        name_connections("sweep")
        eager.off()  # what the sweep enqueues is for the workers
        try:
            settings = SweepSettings()
            if problem := startup_problem():
                raise ImproperlyConfigured(problem)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        if json and not once:
            raise CommandError("--json: only with --once (one pass, one object)")
        if once:
            progress = Progress(self.stderr, wanted=not json)

            def on_step(name: str, place: int, steps: int) -> None:
                progress.say(f"sweep: step {place} of {steps}, {name}", now=True)

            with progress:
                result = sweep_once(settings, on_step=on_step)
            if json:
                self.stdout.write(dumps(pass_values(result), sort_keys=True))
            else:
                for line in human(result):
                    self.stdout.write(line)
            if result is not None and result.failed:
                raise CommandError(f"sweep steps failed: {', '.join(result.failed)}")
            return
        asyncio.run(self._loop(settings))

    async def _loop(self, settings: SweepSettings) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        thread = ThreadPoolExecutor(1, thread_name_prefix="sweep")
        outage = Outage()

        async def in_thread[T](fn: Callable[[], T]) -> T:
            return await loop.run_in_executor(thread, fn)

        relayer = Relayer(in_thread, outage)
        listener = Listener(
            "",
            asyncio.Event(),
            outage,
            on_notice=relayer.on_notice,
            channels=(OUTBOX_CHANNEL,),
        )
        timers = _timers(settings, in_thread, stop, outage)
        self.stdout.write(f"sweeping every {settings.interval_s:g} s; SIGTERM or Ctrl-C stops")
        for line in too_fine():
            self.stderr.write(f"warning: {line}")
        unfold = fold_driver_warnings(outage)
        try:
            await asyncio.gather(
                *(timer.run() for timer in timers), relayer.run(stop), listener.run(stop)
            )
        finally:
            unfold()
            for close in (connections.close_all, close_lock):
                await loop.run_in_executor(thread, close)
            thread.shutdown(wait=True)


def _timers(
    settings: SweepSettings,
    in_thread: Callable[[Callable[[], Any]], Awaitable[Any]],
    stop: asyncio.Event,
    outage: Outage,
) -> list[PeriodicTask]:
    """The passes on their timer, and the rescue alone on its own (unless it is 0)."""
    passes: list[tuple[str, float, Callable[[], Any]]] = [
        ("sweep", settings.interval_s, lambda: sweep_once(settings, outage=outage))
    ]
    if settings.rescue_interval_s > 0:
        passes.append(
            ("rescue", settings.rescue_interval_s, lambda: rescue_once(settings, outage=outage))
        )
    return [
        PeriodicTask(
            name=name,
            operation=functools.partial(in_thread, once),
            interval_s=interval_s,
            mode="fixed_delay",
            timeout_s=settings.timeout_s,
            stop=stop,
            on_error="continue",
            # The lock attempt meeting a server that went away is the outage's to log.
            report=lambda exc: outage.failed("sweep", exc),
        )
        for name, interval_s, once in passes
    ]
