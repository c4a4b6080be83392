"""Django tasks run by a real ``manage.py runworker DJANGO_TASK`` process, stopped by SIGTERM.

Enqueued and read back through Django's public API; the worker's own log shows Django's
``task_started``/``task_finished`` receivers firing in that process.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tests import tasks
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workers.django_tasks.compat import LOGGER_NAME, TaskResultStatus

pytestmark = pytest.mark.usefixtures("committed")


def _wait(predicate: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_runworker_runs_django_tasks_to_their_results(ctx: OpContext) -> None:
    with using_context(ctx):
        ok = tasks.add.enqueue(20, 22)
        aio = tasks.async_add.enqueue(1, 2)
        flaky = tasks.flaky.enqueue(fail_times=1)
        dead = tasks.always_fails.enqueue("declined")
        results = [ok, aio, flaky, dead]
    proc = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "DJANGO_TASK", "--metrics-port", "0"],
        cwd=ROOT,
        env=subprocess_env(WORKER_POLL_INTERVAL_MS="50", LOG_LEVEL="INFO", TASKS_LOG_LEVEL="INFO"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def finished() -> bool:
        with using_context(ctx):
            for result in results:
                result.refresh()
            return all(result.is_finished for result in results)

    try:
        _wait(finished)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert (ok.status, ok.return_value, ok.attempts) == (TaskResultStatus.SUCCESSFUL, 42, 1)
    assert (aio.status, aio.return_value) == (TaskResultStatus.SUCCESSFUL, {"sum": 3, "loop": True})
    assert (flaky.status, flaky.attempts) == (TaskResultStatus.SUCCESSFUL, 2)
    assert flaky.return_value == {"attempt": 2, "result_id": flaky.id}
    assert [e.exception_class_path for e in flaky.errors] == ["builtins.ConnectionError"]
    assert (dead.status, dead.attempts) == (TaskResultStatus.FAILED, 2)
    assert "ValueError: declined" in dead.errors[-1].traceback
    [worker_id] = set(ok.worker_ids)
    assert worker_id.split(":")[1] == str(proc.pid)  # host:pid:suffix
    # Django's own receivers log every attempt's start and end, in the worker.
    for result, states in (
        (ok, ["RUNNING", "SUCCESSFUL"]),
        (aio, ["RUNNING", "SUCCESSFUL"]),
        (flaky, ["RUNNING", "READY", "RUNNING", "SUCCESSFUL"]),
        (dead, ["RUNNING", "READY", "RUNNING", "FAILED"]),
    ):
        logged = [
            re.search(r"state=(\w+)", line)[1]  # type: ignore[index]
            for line in output.splitlines()
            if f"logger={LOGGER_NAME}" in line and f"Task id={result.id} " in line
        ]
        assert logged == states, (result.task.name, logged)
