"""A held worker: a real ``runworker`` process, started by a test, whose handler for one kind
stops at one point of its run until the test lets it go, so the test can kill it, freeze it or
cut its connection at that moment.

The points: ``started`` (before the handler's first line) and ``returned`` (the handler has
returned, its outcome not written yet). The process and the test speak through files in a
folder of their own: the process writes ``held`` (the item, its attempt) when its handler
reaches the point and ``events`` (each warning the worker logs: a refused write is one); the
test writes ``release``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from django.conf import settings
from django.db import connections

from tenancy.contexts import OpContext
from workqueue import runtime
from wqcore.logs import event_name

STARTED = "started"
RETURNED = "returned"
POINTS = (STARTED, RETURNED)
# What a held handler reports as its progress once let go (``report``): a stale holder's
# progress write, which the fence must refuse.
STALE_NOTE = "written by a stale holder"
_CHILD = Path(__file__).with_name("held_child.py")
# How often the held handler looks for the test's release, and the test for the process.
_LOOK_S = 0.02


class HeldWorker:
    """A ``runworker`` process for ``kind`` in ``lane`` whose handler holds at ``point``.

    ``lease_s``: its lease, long by default, so that no lease runs out on the wall clock
    while the test acts (a fault moves the lease by the database's clock instead).
    ``report``: once let go, the handler reports progress (``STALE_NOTE``) before it ends."""

    def __init__(
        self,
        kind: str,
        lane: str,
        *,
        point: str = RETURNED,
        lease_s: float = 300.0,
        report: bool = False,
    ) -> None:
        if point not in POINTS:
            raise ValueError(f"a held worker holds at one of {', '.join(POINTS)}, not {point!r}")
        handler = runtime.handler_for(kind)
        if handler is None:
            raise ValueError(f"no handler runs {kind} in this process: nothing to hold")
        self.kind, self.lane = kind, lane
        self.folder = Path(tempfile.mkdtemp(prefix="workqueue-held-"))
        self.config = {
            "settings": _settings_module(),
            "names": {alias: connections[alias].settings_dict["NAME"] for alias in connections},
            "sys_path": [p or os.getcwd() for p in sys.path],
            # The handler's own module, so the process has the same handler (a test's too).
            "modules": [type(handler).__module__],
            "kind": kind,
            "lane": lane,
            "point": point,
            "lease_s": float(lease_s),
            "report": report,
            "folder": str(self.folder),
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HeldWorker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and self.proc is not None and self.alive():
            self.kill()  # the test failed: its handler may never be let go
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def start(self) -> None:
        path = self.folder / "config.json"
        path.write_text(json.dumps(self.config))
        with (self.folder / "output").open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(_CHILD), str(path)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def wait_held(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Wait until the handler holds at its point; returns what it holds (``item``,
        ``attempt``). Fails with the process's output if it ended, or after ``timeout_s``."""
        held = self.folder / "held"
        deadline = time.monotonic() + timeout_s
        while not held.exists():
            if self._proc.poll() is not None:
                raise AssertionError(
                    f"the held worker ended before its handler held:\n{self.output()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the held worker's handler for {self.kind} did not start within "
                    f"{timeout_s:g} s (is the item due in lane {self.lane}?):\n{self.output()}"
                )
            time.sleep(_LOOK_S)
        found: dict[str, Any] = json.loads(held.read_text())
        return found

    def release(self) -> None:
        """Let the held handler go on."""
        (self.folder / "release").touch()

    def kill(self) -> None:
        """SIGKILL: the process ends at once, holding what it held (a crash, the OOM killer)."""
        self._proc.send_signal(signal.SIGKILL)
        self._proc.wait()

    def freeze(self) -> None:
        """SIGSTOP: the process runs nothing (no lease renewal, no write) until ``thaw``."""
        self._proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._proc.send_signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (the worker drains: a handler let go ends, its outcome written or refused),
        then SIGKILL if it has not ended within ``timeout_s``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def events(self) -> list[str]:
        """The warnings the worker logged, by event name (``stale_complete_refused``, ...)."""
        path = self.folder / "events"
        return path.read_text().split() if path.exists() else []

    def output(self) -> str:
        path = self.folder / "output"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    @property
    def _proc(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise RuntimeError("the held worker is not started")
        return self.proc


def _settings_module() -> str:
    module = getattr(settings, "SETTINGS_MODULE", None) or os.environ.get("DJANGO_SETTINGS_MODULE")
    if not module:
        raise RuntimeError(
            "a held worker runs in a process of its own, which loads the site's settings by "
            "module: run the tests with DJANGO_SETTINGS_MODULE (pytest-django: --ds or "
            "DJANGO_SETTINGS_MODULE in pytest.ini), not settings.configure()"
        )
    return module


# -- in the held worker's process --------------------------------------------------------------


# What the held worker's process keeps entered until it ends (its handler held).
_FOR_LIFE = contextlib.ExitStack()


class _Events(logging.Handler):
    """Writes each warning's event name to the folder's ``events`` file."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.WARNING)
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        with self.path.open("a") as out:
            out.write(event_name(record).split()[0] + "\n")


def hold_in_this_process(config: dict[str, Any]) -> None:
    """In the held worker's process: its handler for the kind held (``held_handler``), and
    its warnings written for the test. For the life of the process."""
    folder = Path(config["folder"])
    for name in ("workers", "workqueue"):
        logger = logging.getLogger(name)
        logger.addHandler(_Events(folder / "events"))
        if logger.getEffectiveLevel() > logging.WARNING:
            logger.setLevel(logging.WARNING)
    kind = config["kind"]
    own = type(runtime.handler_for(kind))
    held = held_handler(own, config["point"], folder, report=config["report"])
    _FOR_LIFE.enter_context(runtime.handled_by(kind, held))


def held_handler(own: type[Any], point: str, folder: Path, *, report: bool) -> type[Any]:
    """A handler class that runs ``own`` and holds at ``point`` until ``folder/release``
    exists: async when ``own`` is (on the loop), sync otherwise (in its thread)."""
    release = folder / "release"

    def tell(item: runtime.WorkItem) -> None:
        text = json.dumps({"item": str(item.id), "attempt": item.attempts, "pid": os.getpid()})
        (folder / "held.tmp").write_text(text)
        (folder / "held.tmp").rename(folder / "held")

    def after(run: runtime.Run) -> None:
        if report:
            run.progress(1, 1, note=STALE_NOTE)

    class Held:
        uses_threads = getattr(own, "uses_threads", False)

        def __init__(self) -> None:
            self.own = own()

        def timeout_for(self, item: runtime.WorkItem) -> float | None:
            limit = getattr(self.own, "timeout_for", None)
            return limit(item) if limit is not None else None

    class HeldAsync(Held):
        async def handle(self, ctx: OpContext, item: runtime.WorkItem, run: runtime.Run) -> object:
            if point == STARTED:
                tell(item)
                while not release.exists():
                    await asyncio.sleep(_LOOK_S)
            result = await self.own.handle(ctx, item, run)
            if point == RETURNED:
                tell(item)
                while not release.exists():
                    await asyncio.sleep(_LOOK_S)
            after(run)
            return result

    class HeldSync(Held):
        def handle(self, ctx: OpContext, item: runtime.WorkItem, run: runtime.Run) -> object:
            if point == STARTED:
                tell(item)
                while not release.exists():
                    time.sleep(_LOOK_S)
            result = self.own.handle(ctx, item, run)
            if point == RETURNED:
                tell(item)
                while not release.exists():
                    time.sleep(_LOOK_S)
            after(run)
            return result

    return HeldAsync if inspect.iscoroutinefunction(own.handle) else HeldSync
