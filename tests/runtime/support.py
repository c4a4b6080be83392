"""Helpers for runtime tests: scripted test kinds, an in-process worker, a real subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connections

from project.database import url_for
from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from workers.config import WorkerSettings
from workers.worker import Worker
from workqueue.api import Kind, Payload, PermanentError, RetryableError, Run, handles, register
from workqueue.models import WorkItem

ROOT = Path(__file__).resolve().parents[2]

# What the scripted handlers saw: (item id, event, monotonic time).
EVENTS: list[tuple[str, str, float]] = []


class ScriptedPayload(Payload):
    # ok | retry | permanent | side_effect_then_fail
    action: str = "ok"
    sleep_s: float = 0.0


register(Kind("TEST_SCRIPTED", ScriptedPayload, max_attempts=3))
register(Kind("TEST_SCRIPTED_SYNC", ScriptedPayload, max_attempts=3))
register(Kind("TEST_UNHANDLED", ScriptedPayload, max_attempts=3))
register(Kind("TEST_QUERYING_SYNC", ScriptedPayload, max_attempts=3))


def _act(item: WorkItem, run: Run) -> None:
    action = item.payload.get("action", "ok")
    if action == "retry":
        raise RetryableError("try again")
    if action == "permanent":
        raise PermanentError("never")
    if action == "side_effect_then_fail":
        run.mark_side_effect()
        raise RetryableError("failed after sending")


@handles("TEST_SCRIPTED")
class ScriptedHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        EVENTS.append((str(item.id), "start", time.monotonic()))
        try:
            if item.payload.get("sleep_s"):
                await asyncio.sleep(item.payload["sleep_s"])
            _act(item, run)
        except asyncio.CancelledError:
            EVENTS.append((str(item.id), "cancelled", time.monotonic()))
            raise
        EVENTS.append((str(item.id), "end", time.monotonic()))


@handles("TEST_SCRIPTED_SYNC")
class ScriptedSyncHandler:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        EVENTS.append((str(item.id), "start", time.monotonic()))
        deadline = time.monotonic() + item.payload.get("sleep_s", 0)
        while time.monotonic() < deadline:
            if run.cancelled:
                EVENTS.append((str(item.id), "cancelled", time.monotonic()))
                return
            time.sleep(0.01)
        _act(item, run)
        EVENTS.append((str(item.id), "end", time.monotonic()))


@handles("TEST_QUERYING_SYNC")
class QueryingSyncHandler:
    """A sync handler whose one statement runs on its thread's own connection."""

    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
        EVENTS.append((str(item.id), "end", time.monotonic()))


def settings(*kinds: str, **overrides: Any) -> WorkerSettings:
    base: dict[str, Any] = {
        "capacity": 4,
        "lease_s": 30.0,
        "poll_interval_ms": 50,
        "heartbeat_interval_s": 0.2,
        "shutdown_grace_s": 5.0,
        "metrics_port": 0,
        "metrics_host": "127.0.0.1",
        "complete_flush_ms": 1,
        # In-process workers run without the sweep unless a test is about it.
        "sweep": False,
    }
    base.update(overrides)
    return WorkerSettings(kinds=kinds or ("TEST_SCRIPTED",), **base)


async def run_until(worker: Worker, done: Callable[[], bool], timeout_s: float = 20) -> None:
    """Run ``worker`` until ``done()`` holds (checked off the loop's DB threads), then drain it."""
    task = asyncio.create_task(worker.run())
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if task.done():
                break
            if await asyncio.to_thread(_closing(done)):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the worker did not get there in time")
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 30)


def _closing(fn: Callable[[], bool]) -> Callable[[], bool]:
    def call() -> bool:
        try:
            return fn()
        finally:
            connections.close_all()

    return call


def count(**filters: Any) -> int:
    return WorkItem.objects.using("admin").filter(**filters).count()


def subprocess_env(*, handlers: bool = False, **extra: str) -> dict[str, str]:
    """The environment for a ``manage.py`` subprocess on this test database and its logins;
    ``handlers`` loads the test kinds of ``tests/runtime/subprocess_kinds.py`` too."""

    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
    env.update(
        DATABASE_URL=url_for(connections["default"].settings_dict),
        SYSTEM_DATABASE_URL=url_for(connections["system"].settings_dict),
        ADMIN_DATABASE_URL=url_for(connections["admin"].settings_dict),
        PYTHONUNBUFFERED="1",
    )
    if handlers:
        env["WORKER_HANDLER_MODULES"] = "tests.runtime.subprocess_kinds"
    env.update(extra)
    return env


PYTHON = sys.executable

# The events after which a worker logs the handler's own traceback (DEBUG on, a terminal, JSON).
HANDLER_FAILURES = ("item_retried", "item_dead_lettered")


def crash_tracebacks(out: str) -> list[str]:
    """The tracebacks in a worker's output that are not a handler failure's own (logged on the
    lines after its ``item_retried`` or ``item_dead_lettered`` event, or in that event's JSON
    line): what the worker itself raised, each by its first line."""
    found: list[str] = []
    attached = False
    for line in out.splitlines():
        event = line.startswith("ts=") or line.lstrip().startswith("{")
        if event:
            attached = any(name in line for name in HANDLER_FAILURES)
        if "Traceback (most recent call last)" in line and not attached:
            found.append(line)
    return found


def wait_until(predicate: Callable[[], bool], timeout_s: float = 60) -> None:
    """Return once ``predicate()`` holds, looking every 50 ms; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def stop_all(procs: list[subprocess.Popen[str]]) -> list[str]:
    """SIGTERM every process, then each one's output once it ended (killed after 30 s)."""
    outputs = []
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=30)[0])
        finally:
            proc.kill()
    return outputs
