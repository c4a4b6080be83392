"""manage.py runworker [KIND]: claim and run work of every handled kind, or of those named."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import threading
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from workers import eager, reloading
from workers.config import WorkerSettings, served_kinds
from workers.sweep.config import SweepSettings
from workers.worker import Worker
from workqueue import runtime
from workqueue.runtime import startup_problem
from wqcore.appname import name_connections
from wqcore.conf import effective
from wqcore.logs import log_event

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Run a worker for every kind your apps register a handler for (or for KIND alone; "
        "several as KIND_A,KIND_B; '*' is every kind; --exclude KIND leaves one out): "
        "claim work of the lane, run it, renew leases, run the sweep (WORKER_SWEEP=false turns "
        "it off), serve /healthz and /metrics on WORKER_METRICS_HOST (127.0.0.1 by default) "
        "and WORKER_METRICS_PORT (9100 by default, or the next free port when another worker "
        "on this host has it). --reload (on by default when DEBUG is on and stderr is a "
        "terminal, as runserver; --noreload turns it off) drains and restarts it when a source "
        "file changes. SIGTERM or Ctrl-C drains (a "
        "second one stops at once, still handing back what was running). The options override "
        "the WORKQUEUE settings listed below, with the values in effect."
    )
    # The database set-up is checked below with one line, not Django's multi-line report.
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        prefixes = ("WORKER_", "SWEEP", "SCHEDULE_", "KIND_", "LOG_", "LANE_CAPS")
        parser.epilog = "settings (WORKQUEUE[...]):\n" + effective(prefixes) + _connections()
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "kind",
            nargs="?",
            default="",
            help="the work kind(s) to run, comma-separated (default, or '*': every handled kind)",
        )
        parser.add_argument(
            "--exclude",
            action="append",
            default=[],
            metavar="KIND",
            help="a kind not to run (repeatable)",
        )
        parser.add_argument("--lane", help="the lane to claim from (WORKER_LANE)")
        parser.add_argument("--capacity", type=int, help="items run at once (WORKER_CAPACITY)")
        parser.add_argument(
            "--once", action="store_true", help="run what is available now, then exit"
        )
        parser.add_argument(
            "--reload",
            action="store_true",
            default=None,
            help="drain and restart when a source file changes (default: DEBUG and a terminal)",
        )
        parser.add_argument("--noreload", action="store_false", dest="reload", help="never reload")
        parser.add_argument(
            "--metrics-port",
            type=int,
            help="port for /healthz and /metrics (WORKER_METRICS_PORT; 0: any free port, -1: none)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name_connections("worker")
        eager.off()  # a handler's enqueues are claimed here, by the worker
        reload = options["reload"]
        if reload is None:
            reload = reloading.default_on()
        reload = reload and not options["once"]
        if reload and not reloading.is_child():
            sys.exit(reloading.run_parent())
        self._watch = reloading.Watch(lambda path: self._reload_soon(path)) if reload else None
        try:
            kinds = served_kinds(options["kind"], options["exclude"])
            settings = WorkerSettings.from_settings(
                kinds,
                lane=options["lane"],
                capacity=options["capacity"],
                once=options["once"] or None,
                metrics_port=options["metrics_port"],
            )
            sweep = SweepSettings() if settings.sweep else None
            if problem := startup_problem():
                raise ImproperlyConfigured(problem)
            if not runtime.is_declared(settings.lane):
                # Its items are counted under "(undeclared)" on /metrics, and the API refuses
                # the lane: most likely a typo.
                log_event(
                    logger,
                    logging.WARNING,
                    "lane_undeclared",
                    lane=settings.lane,
                    declared=",".join(runtime.declared_lanes()),
                    hint="declare it in WORKQUEUE['LANES']",
                )
            # What is loaded by now (Django, the apps, the handlers) lives as long as the
            # process: out of the cyclic collector's reach, a full collection walks only what
            # the work makes (a drain spent a tenth of its time walking the rest).
            gc.freeze()
            # The checks' sessions (this thread's): the loop runs here and never uses them.
            connections.close_all()
            self._run_to_the_end(settings, sweep)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        finally:
            if self._watch is not None:
                self._watch.stop()
        code = reloading.RESTART if self._watch is not None and self._watch.changed else 0
        # A sync handler cancelled on shutdown may still be running in its thread; its item was
        # released and its writes are refused by the token, so do not wait for it to return.
        if threading.active_count() > 1 and any(
            t.name.startswith("worker-handler") for t in threading.enumerate()
        ):
            os._exit(code)
        if code:
            sys.exit(code)

    def _reload_soon(self, path: str) -> None:
        """From the watch's thread: drain the worker on its loop, as a first SIGTERM does."""
        self._loop.call_soon_threadsafe(self._reload, path)

    def _reload(self, path: str) -> None:
        log_event(logger, logging.INFO, "worker_reloading", changed=path)
        if self._worker.signals == 0:
            self._worker.request_stop()

    def _run_to_the_end(self, settings: WorkerSettings, sweep: SweepSettings | None) -> None:
        """Run the worker on its event loop until it has drained.

        A handler's ``SystemExit`` or ``KeyboardInterrupt`` is its item's failure
        (``workqueue.handlers.is_failure``), but asyncio raises one out of the loop, ending the
        process, when it comes from a task or callback of the handler's own (a task it created,
        ``asyncio.gather`` of coroutines): the loop stops between two callbacks and loses none,
        so run it on. The awaiting handler then gets the exception and its item fails; the
        process ends only when the worker's own task does. Before the signal handlers are in
        place (the worker's first step), a ``KeyboardInterrupt`` is a real Ctrl-C: it ends
        the process, as always."""
        self._signals_handled = False
        with asyncio.Runner() as runner:
            worker = runner.get_loop().create_task(self._run(settings, sweep), name="worker")
            while True:
                try:
                    runner.run(_until_done(worker))
                    return
                except (SystemExit, KeyboardInterrupt) as exc:
                    if worker.done() or not self._signals_handled:
                        raise
                    log_event(
                        logger,
                        logging.ERROR,
                        "loop_interrupted",
                        error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
                        note="a task or callback a handler started raised it; the worker goes "
                        "on, and the handler awaiting it fails",
                    )

    async def _run(self, settings: WorkerSettings, sweep: SweepSettings | None) -> None:
        worker = Worker(settings, sweep)
        loop = asyncio.get_running_loop()
        # From here on no signal raises KeyboardInterrupt: SIGINT and SIGTERM drain.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.request_stop)
        self._signals_handled = True
        self._worker, self._loop = worker, loop
        if self._watch is not None:
            self._watch.start()
        await worker.run()


async def _until_done(task: asyncio.Task[None]) -> None:
    await task


def _connections() -> str:
    """What a worker opens with these settings, for ``--help`` (nothing when they are wrong:
    the settings above say so)."""
    try:
        own = WorkerSettings(kinds=()).connections
    except ImproperlyConfigured:
        return ""
    return (
        f"\n\ndatabase connections: {own.describe()} of its own, plus one per handler thread "
        "(a sync handler: one per item it runs at once), within WORKER_DB_POOL_SIZE"
    )
