"""manage.py sweep: the queue's maintenance on a timer (or one pass with --once)."""

from __future__ import annotations

import argparse
import asyncio
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from workers.listen import Listener
from workers.outage import Outage
from workers.periodic import PeriodicTask
from workers.relayer import CHANNEL as OUTBOX_CHANNEL
from workers.relayer import Relayer
from workers.sweep.config import SweepSettings
from workers.sweep.sweeper import STEPS, PassResult, close_lock, sweep_once
from workqueue.checks import startup_problem
from wqcore.conf import effective


def _summary(result: PassResult | None) -> str:
    if result is None:
        return "sweep skipped: another sweeper holds the lock"
    done = " ".join(f"{name}={value}" for name, value in result.results.items())
    failed = f" failed={','.join(result.failed)}" if result.failed else ""
    return f"sweep took_s={result.took_s:.3f} {done}{failed}"


class Command(BaseCommand):
    help = (
        "Run the queue's maintenance: requeue stale items (dead-lettering those whose attempts "
        "are spent), relay the outbox (also at once on each outbox_pending notice), purge "
        "relayed outbox rows, done items and dead letters (and discarded items) past their "
        "retention, expired sessions and the API's stored Idempotency-Key answers "
        "(IDEMPOTENCY_KEY_RETENTION_S), and read the gauges. One sweeper acts at a time across "
        "hosts (a mutex only the system login may take). Steps: "
        + ", ".join(name for name, _ in STEPS)
        + ". The WORKQUEUE settings it reads are listed below, with the values in effect."
    )
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = "settings (WORKQUEUE[...]):\n" + effective(
            ("SWEEP_", "ITEM_", "DEAD_LETTER_", "OUTBOX_", "IDEMPOTENCY_", "LOG_")
        )
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once", action="store_true", help="run one pass, print what it did, and exit"
        )

    def handle(self, *args: Any, once: bool = False, **options: Any) -> None:
        try:
            settings = SweepSettings.from_settings()
            if problem := startup_problem():
                raise ImproperlyConfigured(problem)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        if once:
            result = sweep_once(settings)
            self.stdout.write(_summary(result))
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

        async def in_thread(fn: Any) -> Any:
            return await loop.run_in_executor(thread, fn)

        relayer = Relayer(in_thread, outage)
        listener = Listener(
            "",
            asyncio.Event(),
            outage,
            on_notice=lambda channel, payload: relayer.notice(),
            channels=(OUTBOX_CHANNEL,),
        )
        passes = PeriodicTask(
            name="sweep",
            operation=lambda: in_thread(lambda: sweep_once(settings)),
            interval_s=settings.interval_s,
            mode="fixed_delay",
            timeout_s=settings.timeout_s,
            stop=stop,
            on_error="continue",
        )
        self.stdout.write(f"sweeping every {settings.interval_s:g} s; SIGTERM or Ctrl-C stops")
        try:
            await asyncio.gather(passes.run(), relayer.run(stop), listener.run(stop))
        finally:
            for close in (connections.close_all, close_lock):
                await loop.run_in_executor(thread, close)
            thread.shutdown(wait=True)
