"""Chains and groups of Django tasks run by a worker: in this process (``workers.testing.drain``,
the real worker loop) and by real ``manage.py runworker DJANGO_TASK`` processes. Each step reads
what its parents returned (``parent_results``), a group's callback how they ended
(``parent_counts``), sync and async tasks alike; results read back through ``get_result``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tests import tasks
from tests.runtime.support import PYTHON, ROOT, stop_all, subprocess_env, wait_until
from tests.tasks import noted
from workers import testing
from workers.django_tasks.compat import TaskResult, TaskResultStatus
from workers.django_tasks.workflows import TaskStep, chain, group, step
from workers.models import Worker as WorkerRow
from workers.models import WorkerState
from workqueue.models import Attempt

pytestmark = pytest.mark.usefixtures("committed")


@pytest.fixture
def member(ctx: OpContext) -> Iterator[OpContext]:
    with using_context(ctx):
        yield ctx


def _read(result: TaskResult) -> TaskResult:
    return result.task.get_result(result.id)


def _three_steps(log: Path) -> list[TaskStep]:
    """A chain's steps a (sync), b (async), c (sync): each returns what it was handed plus its
    own number, so c returns 1 + 10 + 100."""
    return [
        step(tasks.adds_to_parents, str(log), "a", 1),
        step(tasks.async_adds_to_parents, str(log), "b", 10),
        step(tasks.adds_to_parents, str(log), "c", 100),
    ]


_CHAIN_LOG = [
    ("a", "start"),
    ("a", "handed []"),
    ("a", "end"),
    ("b", "start"),
    ("b", "handed [1]"),
    ("b", "end"),
    ("c", "start"),
    ("c", "handed [11]"),
    ("c", "end"),
]


def test_a_chain_hands_each_steps_result_to_the_next(member: OpContext, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    made = chain(*_three_steps(log)).enqueue()
    drained = testing.drain("default", ["DJANGO_TASK"])
    assert drained.done == 3
    assert noted(str(log)) == _CHAIN_LOG
    assert [_read(r).return_value for r in made.results] == [1, 11, 111]
    assert {_read(r).status for r in made.results} == {TaskResultStatus.SUCCESSFUL}


def test_a_dead_member_holds_on_success_and_on_complete_counts_it(
    member: OpContext, tmp_path: Path
) -> None:
    log = tmp_path / "steps.log"
    made = group(
        [*(step(tasks.add, n, n) for n in range(3)), tasks.refuses],
        on_success=step(tasks.reports_parents, str(log), "success"),
        on_complete=step(tasks.async_reports_parents, str(log), "complete"),
    ).enqueue()
    assert made.on_success is not None and made.on_complete is not None
    testing.drain("default", ["DJANGO_TASK"], raise_failures=False)
    assert noted(str(log)) == [("complete", 'counts {"FAILED": 1, "SUCCESSFUL": 3}')]
    complete = _read(made.on_complete)
    assert complete.return_value == {"SUCCESSFUL": 3, "FAILED": 1}
    # Held while the member is dead: it will run once that member is requeued and succeeds.
    assert _read(made.on_success).status == TaskResultStatus.READY
    assert [_read(m).status for m in made.members] == [TaskResultStatus.SUCCESSFUL] * 3 + [
        TaskResultStatus.FAILED
    ]


def test_the_sync_helper_in_an_async_task_fails_its_try_naming_the_async_one(
    member: OpContext,
) -> None:
    result = tasks.reads_parents_without_await.enqueue()
    testing.drain("default", ["DJANGO_TASK"], raise_failures=False)
    [error] = _read(result).errors
    assert error.exception_class is RuntimeError
    assert "parent_results() reads the database: in an async task, await aparent_results()" in (
        error.traceback
    )


# -- real runworker processes ---------------------------------------------------------------------


def _start() -> subprocess.Popen[str]:
    return subprocess.Popen(
        # Ten at a time: neither worker takes the whole group in one claim.
        [
            PYTHON,
            "manage.py",
            "runworker",
            "DJANGO_TASK",
            "--capacity",
            "10",
            "--metrics-port",
            "-1",
        ],
        cwd=ROOT,
        env=subprocess_env(WORKER_POLL_INTERVAL_MS="50", TASKS_LOG_LEVEL="WARNING"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finished(ctx: OpContext, *results: TaskResult) -> Callable[[], bool]:
    def check() -> bool:
        with using_context(ctx):
            return all(_read(r).is_finished for r in results)

    return check


def test_runworker_runs_a_chain_in_order_and_a_groups_callback_once(
    ctx: OpContext, tmp_path: Path
) -> None:
    chain_log, group_log = tmp_path / "chain.log", tmp_path / "group.log"
    members = 100
    procs = [_start(), _start()]
    try:
        # Both workers up before the group is there, so both take members.
        wait_until(
            lambda: WorkerRow.objects.using("admin").filter(state=WorkerState.RUNNING).count() == 2
        )
        with using_context(ctx):
            chained = chain(*_three_steps(chain_log)).enqueue(key="chain")
            grouped = group(
                [step(tasks.adds_to_parents, str(group_log), f"m{n}", n) for n in range(members)],
                on_success=step(tasks.reports_parents, str(group_log), "success"),
                on_complete=step(tasks.async_reports_parents, str(group_log), "complete"),
            ).enqueue(key="group")
        assert grouped.on_success is not None and grouped.on_complete is not None
        wait_until(_finished(ctx, chained.results[-1], grouped.on_success, grouped.on_complete))
    finally:
        outputs = stop_all(procs)
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert noted(str(chain_log)) == _CHAIN_LOG
    with using_context(ctx):
        assert [_read(r).return_value for r in chained.results] == [1, 11, 111]
        assert _read(grouped.on_success).return_value == {"SUCCESSFUL": members}
        assert _read(grouped.on_complete).return_value == {"SUCCESSFUL": members}
    lines = noted(str(group_log))
    starts = sorted(label for label, what in lines if what == "start")
    assert starts == sorted(f"m{n}" for n in range(members))  # each member once
    counted = [(label, what) for label, what in lines if what.startswith("counts")]
    # Each callback once, after every member ended.
    assert sorted(counted) == [
        ("complete", f'counts {{"SUCCESSFUL": {members}}}'),
        ("success", f'counts {{"SUCCESSFUL": {members}}}'),
    ]
    last_member_end = max(i for i, (label, what) in enumerate(lines) if what == "end")
    assert min(lines.index(c) for c in counted) > last_member_end
    member_ids = [m.id for m in grouped.members]
    workers = Attempt.objects.using("admin").filter(item_id__in=member_ids).values("worker")
    assert workers.distinct().count() == 2
