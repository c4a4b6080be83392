"""Workflows run by real ``manage.py runworker`` processes: a chain's steps in order, each handed
what the one before it returned, a group of 1,000 members spread over four workers and its
callbacks started exactly once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.runtime import workflow_kinds
from tests.runtime.support import PYTHON, ROOT, count, stop_all, subprocess_env, wait_until
from tests.runtime.workflow_kinds import STEP, noted
from workers.models import Worker as WorkerRow
from workers.models import WorkerState
from workqueue import api
from workqueue.models import Attempt, Status

pytestmark = pytest.mark.usefixtures("committed")

assert workflow_kinds  # registers TEST_STEP in this process, to enqueue it


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", STEP.name, "--metrics-port", "-1", *args],
        cwd=ROOT,
        env=subprocess_env(WORKER_HANDLER_MODULES="tests.runtime.workflow_kinds"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _step(label: str, log: Path, **extra: object) -> api.NewItem:
    return api.NewItem(STEP.name, {"label": label, "log": str(log), **extra})


def test_a_chain_runs_in_order(ctx, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    wf = api.Workflow()
    wf.chain(*(_step(label, log, sleep_s=0.1, handed=True) for label in ("a", "b", "c")))
    declared = api.enqueue_workflow(ctx, wf)
    procs = [_start()]
    try:
        wait_until(lambda: count(id__in=declared.ids, status=Status.DONE) == 3)
    finally:
        outputs = stop_all(procs)
    assert procs[0].returncode == 0, outputs[0]
    assert noted(str(log)) == [
        ("a", "start"),
        ("a", "handed"),
        ("a", "end"),
        ("b", "start"),
        ("b", "handed a"),
        ("b", "end"),
        ("c", "start"),
        ("c", "handed b"),
        ("c", "end"),
    ]


MEMBERS, WORKERS = 1000, 4


def test_a_group_over_four_workers_starts_its_callbacks_once(ctx, tmp_path: Path) -> None:
    """The members' last completions race in four processes (each takes a few at a time, so
    every worker holds members to the end); each callback starts once, after every member."""
    log = tmp_path / "steps.log"
    wf = api.Workflow()
    group = wf.group(
        [_step(f"m{n}", log, sleep_s=0.01) for n in range(MEMBERS)],
        on_success=_step("success", log, callback=True),
        on_complete=_step("complete", log, callback=True),
    )
    procs = [_start("--capacity", "10") for _ in range(WORKERS)]
    try:
        # Every worker up before the group is there, so each takes members.
        wait_until(
            lambda: (
                WorkerRow.objects.using("admin").filter(state=WorkerState.RUNNING).count()
                == WORKERS
            )
        )
        declared = api.enqueue_workflow(ctx, wf)
        callbacks = [declared[group.on_success], declared[group.on_complete]]
        wait_until(lambda: count(id__in=callbacks, status=Status.DONE) == 2, timeout_s=120)
    finally:
        outputs = stop_all(procs)
    assert [p.returncode for p in procs] == [0] * WORKERS, outputs
    lines = noted(str(log))
    starts = [label for label, what in lines if what == "start"]
    # Every member once, each callback once, and only after every member ended.
    assert sorted(starts) == sorted([f"m{n}" for n in range(MEMBERS)] + ["success", "complete"])
    last_member_end = max(i for i, (label, _) in enumerate(lines) if label.startswith("m"))
    first_callback = min(lines.index(("success", "start")), lines.index(("complete", "start")))
    assert first_callback > last_member_end
    done = f"parents done={MEMBERS}"
    assert ("success", done) in lines and ("complete", done) in lines
    members = [declared[m] for m in group.members]
    workers = Attempt.objects.using("admin").filter(item_id__in=members).values("worker")
    assert workers.distinct().count() == WORKERS
