"""``runworker --reload``: a real worker restarts when its handler's module is edited, draining
first, and runs the edited handler; ``--noreload`` and ``--once`` do not watch."""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tenancy.contexts import OpContext
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue import api
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

MODULE = """
from workqueue.api import Kind, Payload, handles, register

RELOADED = register(Kind("TEST_RELOADED", Payload, max_attempts=1))


@handles(RELOADED.name)
class Handler:
    async def handle(self, ctx, item, run):
        return {answer!r}
"""


def _write(path: Path, answer: str, later_s: float = 0) -> None:
    path.write_text(MODULE.format(answer=answer))
    # A later mtime than the last write, whatever the file system's resolution.
    later = time.time() + later_s
    os.utime(path, (later, later))


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _done(ctx: OpContext) -> object:
    item, _ = api.enqueue(ctx, "TEST_RELOADED", {})
    deadline = time.monotonic() + 60
    while WorkItem.objects.using("admin").get(pk=item.id).status != Status.DONE:
        assert time.monotonic() < deadline, "the item never ran"
        time.sleep(0.1)
    return api.result_of(ctx, item.id)


def test_an_edited_handler_runs_after_the_worker_reloads(ctx: OpContext, tmp_path: Path) -> None:
    package = f"reload_{uuid.uuid4().hex[:8]}"
    source = tmp_path / f"{package}.py"
    _write(source, "v1")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module(package)  # the kind, registered here too, to enqueue it
    finally:
        sys.path.remove(str(tmp_path))
    proc = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "TEST_RELOADED", "--reload", "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(
            WORKER_HANDLER_MODULES=package,
            PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
            WORKER_SWEEP="false",
            WORKER_POLL_INTERVAL_MS="50",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the parent and its child, stopped together below
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        assert _done(ctx) == "v1"
        # Edited again each second until the watch (whose first look at the files may still
        # be under way) notices, as someone saving the file again would.
        deadline = time.monotonic() + 60
        for edit in itertools.count(1):
            _write(source, "v2", later_s=edit)
            if _wait_for(lambda: any("worker_reloading" in line for line in lines), 1):
                break
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
        while sum("worker_started" in line for line in lines) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            time.sleep(0.1)
        assert _done(ctx) == "v2"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    output = "".join(lines)
    # The first worker drained (went offline) before the second started.
    reloading = output.index("worker_reloading")
    assert output.index("worker_offline", reloading) < output.rindex("worker_started")
