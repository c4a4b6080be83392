"""A Django task's progress and metadata (``workers.django_tasks.progress``), written by the
real worker in process to the task's item and kept once it is done."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tests import tasks
from tests.helpers import row
from workers import testing
from workers.django_tasks.compat import TaskResultStatus
from workers.django_tasks.progress import progress, set_meta

pytestmark = pytest.mark.usefixtures("committed")


@pytest.fixture
def member(ctx: OpContext) -> Iterator[OpContext]:
    with using_context(ctx):
        yield ctx


@pytest.mark.parametrize(
    "task", [tasks.counts_rows, tasks.async_counts_rows], ids=["sync", "async"]
)
def test_a_tasks_last_report_is_kept_on_its_item(member: OpContext, task) -> None:  # type: ignore[no-untyped-def]
    result = task.enqueue(10_000)
    assert testing.drain("default", ["DJANGO_TASK"]).done == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 10_000
    stored = row(uuid.UUID(result.id))  # a task's result id is its item's
    assert {k: stored.progress[k] for k in ("done", "total", "note")} == {
        "done": 10_000,
        "total": 10_000,
        "note": "counting",
    }
    assert stored.meta == {"rows": 10_000, "how": "sync" if task is tasks.counts_rows else "async"}


def test_outside_the_worker_a_report_is_checked_and_recorded_nowhere() -> None:
    assert tasks.counts_rows.call(3) == 3  # the function itself: no run to report to
    with pytest.raises(ValueError, match="total: must be at least done"):
        progress(5, 4)
    with pytest.raises(ValueError, match="meta: must be a dict"):
        set_meta(["a"])  # type: ignore[arg-type]
