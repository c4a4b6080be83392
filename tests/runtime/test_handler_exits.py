"""A handler or task that exits or is interrupted fails its item; its worker goes on (issue 18).

Real ``runworker`` processes run the misbehaving handlers of ``tests/runtime/rogue_kinds.py``
(an async one on the loop, a sync one in the threads, one through ``run.in_thread``) and the
tasks of ``tests/runtime/rogue_tasks.py``. ``sys.exit(3)`` or ``raise KeyboardInterrupt`` is
that item's failure, named in its error and retried like any other until it is a dead letter;
each attempt runs once; the process stays alive and claims more (``--once`` exits 0). A real
SIGINT or SIGTERM still drains the worker.
"""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tests.runtime import rogue_tasks
from tests.runtime.rogue_kinds import KINDS, ROGUE, ROGUE_SYNC, ROGUE_THREAD, runs
from tests.runtime.support import PYTHON, ROOT, subprocess_env, wait_until
from workers.django_tasks.compat import TaskResultStatus, default_task_backend
from workqueue import api
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

ROGUE_ENV = {"WORKER_HANDLER_MODULES": "tests.runtime.rogue_kinds", "LOG_LEVEL": "INFO"}
# What each action leaves as the item's error.
EXITS = {
    "sys_exit": "SystemExit: 3",
    "exit": "SystemExit: 3",
    "keyboard_interrupt": "KeyboardInterrupt",
    "generator_exit": "GeneratorExit: raised by the handler",
}


def _stored(item_id: object) -> WorkItem:
    return WorkItem.objects.using("admin").get(pk=item_id)


def _start(kinds: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", kinds, "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(WORKER_POLL_INTERVAL_MS="50", **{**ROGUE_ENV, **env}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _starts(log: str) -> Counter[tuple[str, int]]:
    """How many times each (item, attempt) began."""
    return Counter((item, attempt) for item, attempt, _, what in runs(log) if what == "start")


def test_once_records_each_exit_as_its_items_failure_and_exits_0(
    ctx: OpContext, tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    expected: dict[object, str] = {}
    for kind in (ROGUE, ROGUE_SYNC, ROGUE_THREAD):
        for action, error in EXITS.items():
            item, _ = api.enqueue(ctx, kind.name, {"action": action, "log": log})
            expected[item.id] = error
    # A task of the handler's own that exits: asyncio raises it out of the loop.
    sub, _ = api.enqueue(ctx, ROGUE.name, {"action": "subtask_exit", "log": log})
    expected[sub.id] = "SystemExit: 4"
    ok, _ = api.enqueue(ctx, ROGUE.name, {"log": log})
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", KINDS, "--once", "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(**ROGUE_ENV),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    for item_id, error in expected.items():
        stored = _stored(item_id)
        # A failure like any other: retried (its second attempt is due a second later).
        assert (stored.status, stored.attempts, stored.last_error) == (
            Status.PENDING,
            1,
            error,
        ), stored.kind
    assert _stored(ok.id).status == Status.DONE
    started = _starts(log)
    assert started == Counter({(str(i), 1): 1 for i in [*expected, ok.id]})  # each ran once
    assert "Task exception was never retrieved" not in output


def test_a_worker_goes_on_after_exits_and_dead_letters_them_through_retries(
    ctx: OpContext, tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    exits, _ = api.enqueue(ctx, ROGUE_SYNC.name, {"action": "sys_exit", "log": log})
    interrupted, _ = api.enqueue(ctx, ROGUE.name, {"action": "keyboard_interrupt", "log": log})
    in_thread, _ = api.enqueue(ctx, ROGUE_THREAD.name, {"action": "exit", "log": log})
    rogues = {exits.id: "SystemExit: 3", interrupted.id: "KeyboardInterrupt"}
    rogues[in_thread.id] = "SystemExit: 3"
    proc = _start(KINDS)
    try:
        wait_until(lambda: all(_stored(i).status == Status.FAILED for i in rogues))
        assert proc.poll() is None  # alive after six exits
        later, _ = api.enqueue(ctx, ROGUE.name, {"log": log})
        wait_until(lambda: _stored(later.id).status == Status.DONE)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    for item_id, error in rogues.items():
        stored = _stored(item_id)
        assert (stored.attempts, stored.last_error) == (2, error)
    # Each attempt ran once, both in this one process.
    started = _starts(log)
    assert started == Counter(
        {(str(i), attempt): 1 for i in rogues for attempt in (1, 2)} | {(str(later.id), 1): 1}
    )
    assert {pid for *_, pid, _ in runs(log)} == {proc.pid}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_real_signal_still_drains_the_worker_a_keyboard_interrupt_did_not(
    ctx: OpContext, tmp_path: Path, sig: signal.Signals
) -> None:
    log = str(tmp_path / "runs.log")
    interrupted, _ = api.enqueue(ctx, ROGUE.name, {"action": "keyboard_interrupt", "log": log})
    slow, _ = api.enqueue(ctx, ROGUE.name, {"action": "sleep", "seconds": 60, "log": log})
    proc = _start(ROGUE.name, WORKER_SHUTDOWN_GRACE_S="1")
    try:
        wait_until(lambda: _stored(interrupted.id).last_error == "KeyboardInterrupt")
        wait_until(lambda: (str(slow.id), 1) in _starts(log))
        assert proc.poll() is None
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert "worker_stopping" in output and "worker_offline" in output
    stored = _stored(slow.id)
    # Drained: handed back with a note, its attempt not spent.
    assert (stored.status, stored.attempts) == (Status.PENDING, 0)
    assert "shut down before it finished" in stored.last_error


def test_a_task_that_exits_fails_with_its_class_and_the_worker_goes_on(ctx: OpContext) -> None:
    with using_context(ctx):
        expected = {
            rogue_tasks.exits.enqueue(3).id: SystemExit,
            rogue_tasks.interrupted.enqueue().id: KeyboardInterrupt,
            rogue_tasks.exits_async.enqueue(5).id: SystemExit,
            rogue_tasks.interrupted_async.enqueue().id: KeyboardInterrupt,
        }
        adds = rogue_tasks.adds.enqueue(1, 2)
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", "DJANGO_TASK", "--once", "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(LOG_LEVEL="INFO"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    with using_context(ctx):
        for result_id, cls in expected.items():
            result = default_task_backend.get_result(result_id)
            # Failed once, to be retried: the error is the task's, its class named.
            assert (result.status, result.attempts) == (TaskResultStatus.READY, 1)
            assert [e.exception_class for e in result.errors] == [cls]
            assert _stored(result_id).last_error.startswith(f"TaskRaised: builtins.{cls.__name__}")
        adds.refresh()
        assert (adds.status, adds.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
    assert "Task exception was never retrieved" not in output
