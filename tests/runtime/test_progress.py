"""Progress and metadata from handlers in a real ``runworker`` process: throttled, fenced, and
the last report kept after the item ends.

Every write of an item's progress or metadata is counted by the database itself: a trigger the
test adds on the queue table for the statement's columns (``UPDATE OF progress, meta``: the
claim and the settles never name them) copies each written row into a table of the test's.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from tests.helpers import row
from tests.runtime.subprocess_kinds import PROGRESS, PROGRESS_KINDS, PROGRESS_SYNC
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue import api
from workqueue.models import Status

pytestmark = pytest.mark.usefixtures("committed")

# The reporter's interval in these tests: a one-second loop spans several.
FLUSH_S = 0.2
WRITES = "runtime_progress_writes"


@pytest.fixture
def writes_table(committed) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Each write of an item's progress or metadata, as the row it left, in the order written."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {WRITES} (n bigserial, item_id uuid, progress jsonb, meta jsonb)"
        )
        cursor.execute(
            "CREATE FUNCTION runtime_progress_written() RETURNS trigger LANGUAGE plpgsql"
            f" SECURITY DEFINER AS $$ BEGIN INSERT INTO {WRITES} (item_id, progress, meta)"
            " VALUES (NEW.id, NEW.progress, NEW.meta); RETURN NULL; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER runtime_progress_written AFTER UPDATE OF progress, meta"
            " ON workqueue_workitem FOR EACH ROW EXECUTE FUNCTION runtime_progress_written()"
        )
    try:
        yield
    finally:
        with connections["admin"].cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS runtime_progress_written ON workqueue_workitem")
            cursor.execute("DROP FUNCTION IF EXISTS runtime_progress_written()")
            cursor.execute(f"DROP TABLE IF EXISTS {WRITES}")


def _written(item_id: object) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The item's writes, in order: (progress, meta) as each left the row."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            f"SELECT progress::text, meta::text FROM {WRITES} WHERE item_id = %s ORDER BY n",
            [item_id],
        )
        return [(json.loads(p), json.loads(m)) for p, m in cursor.fetchall()]


def _drain() -> str:
    """Run one worker until nothing is left (``--once``); its output."""
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", PROGRESS_KINDS, "--once", "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(
            handlers=True,
            WORKER_PROGRESS_FLUSH_S=str(FLUSH_S),
            WORKER_POLL_INTERVAL_MS="50",
            WORKER_SWEEP="false",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


@pytest.mark.usefixtures("writes_table")
def test_a_loop_of_100000_reports_writes_at_most_once_per_interval(ctx) -> None:
    """An async and a sync handler each report 100,000 times over about a second: each item is
    written at most once per interval of the reporter (and once more before its outcome), and
    its last report is what the item keeps once done."""
    items = {
        kind: api.enqueue(ctx, kind.name, {"reports": 100_000})[0]
        for kind in (PROGRESS, PROGRESS_SYNC)
    }
    output = _drain()
    for kind, item in items.items():
        stored = row(item.id)
        assert stored.status == Status.DONE, (kind.name, output)
        assert stored.progress, output
        last = {k: stored.progress[k] for k in ("done", "total", "note")}
        assert last == {"done": 100_000, "total": 100_000, "note": "row 100000"}, kind.name
        assert stored.meta["reports"] == 100_000
        elapsed_s = stored.meta["elapsed_s"]  # from before the first report to the loop's end
        written = _written(item.id)
        # An item's periodic writes are an interval apart at least (the worker's clock): over
        # the loop, at most one per interval and one at its start; after it, one more at most
        # (what came after the last, the metadata); then the last, before the completion.
        most = int(elapsed_s / FLUSH_S) + 3
        assert 2 <= len(written) <= most, (kind.name, len(written), elapsed_s)
        done = [progress["done"] for progress, _ in written]
        assert done == sorted(done) and done[-1] == 100_000, (kind.name, done)
        assert written[-1][1] == stored.meta  # the final metadata is the last write's


@pytest.mark.usefixtures("writes_table")
def test_the_last_report_is_kept_when_the_item_fails(ctx) -> None:
    items = [
        api.enqueue(ctx, kind.name, {"reports": 5_000, "spread_s": 0, "fail": True})[0]
        for kind in (PROGRESS, PROGRESS_SYNC)
    ]
    output = _drain()
    for item in items:
        stored = row(item.id)
        assert stored.status == Status.FAILED, output
        assert "failed after reporting" in stored.last_error
        assert (stored.progress["done"], stored.meta["reports"]) == (5_000, 5_000)
