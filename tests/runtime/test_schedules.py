"""Schedules served by real processes (``runworker`` and ``manage.py sweep``): one item per
tick however many sweep, and after downtime one item, not a burst, with the rest counted."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import psycopg
import pytest
from django.db import connections

from project.database import url_for
from tests.factories import OrgFactory
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workers.models import ScheduleState
from workers.sweep.sweeper import MUTEX
from workqueue.models import WorkItem

pytestmark = [pytest.mark.usefixtures("committed"), pytest.mark.slow]

NAME = "test-tick"
MODULES = "tests.runtime.subprocess_kinds,tests.runtime.schedule_kinds"


def _start(command: str, org_id: object, every_s: float) -> subprocess.Popen[str]:
    args = (
        ["runworker", "TEST_TICK", "--metrics-port", "0"] if command == "runworker" else ["sweep"]
    )
    return subprocess.Popen(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(
            WORKER_HANDLER_MODULES=MODULES,
            WORKER_METRICS_HOST="127.0.0.1",
            SWEEP_INTERVAL_S="0.2",
            SCHEDULE_TENANT=str(org_id),
            TEST_SCHEDULE_EVERY_S=str(every_s),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def _wait(predicate: Callable[[], bool], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _ticks() -> list[datetime]:
    keys = WorkItem.objects.using("admin").filter(kind="TEST_TICK")
    prefix = f"schedule:{NAME}:"
    found = [k[len(prefix) :] for k in keys.values_list("idempotency_key", flat=True)]
    return sorted(datetime.fromisoformat(k.replace("Z", "+00:00")) for k in found)


def _state() -> ScheduleState:
    return ScheduleState.objects.using("admin").get(pk=NAME)


def _db_now() -> datetime:
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def test_three_processes_enqueue_exactly_one_item_per_tick_over_30_ticks() -> None:
    org = OrgFactory()
    procs = [
        _start("runworker", org.id, 1),
        _start("runworker", org.id, 1),
        _start("sweep", org.id, 1),
    ]
    try:
        _wait(lambda: len(_ticks()) >= 31, timeout_s=180)
    finally:
        outputs = [_stop(p) for p in procs]
    ticks = _ticks()
    state = _state()
    span = int((ticks[-1] - ticks[0]) / timedelta(seconds=1)) + 1
    # One item per tick, every tick from the first to the last, none skipped.
    assert len(ticks) == len(set(ticks)) == span, (ticks, outputs)
    assert state.skipped == 0 and state.enqueued == len(ticks)
    items = WorkItem.objects.using("admin").filter(kind="TEST_TICK")
    assert {i.org_id for i in items} == {org.id}
    # Every item was inserted by exactly one process (the others met its key, if they tried).
    inserted = sum(out.count("items=1 existing=0") for out in outputs)
    assert inserted == len(ticks), outputs
    assert all(p.returncode == 0 for p in procs), outputs


def test_after_five_ticks_of_downtime_a_restarted_sweeper_enqueues_once_and_counts_five() -> None:
    """Every sweeper stops; a new one starts while the test holds the sweep's mutex (so its
    start-up time cannot blur the count), and acts once the mutex is let go, just after the
    sixth tick since the last one enqueued: one item for that tick, five counted skipped."""
    every = timedelta(seconds=2)
    org = OrgFactory()
    first = _start("sweep", org.id, every.total_seconds())
    try:
        _wait(lambda: len(_ticks()) >= 2)
    finally:
        _stop(first)
    last = _state().last_tick
    before = _ticks()
    assert before[-1] == last
    lock = psycopg.connect(url_for(connections["admin"].settings_dict), autocommit=False)
    restarted = None
    try:
        lock.execute("SELECT FROM workqueue_mutex WHERE name = %s FOR UPDATE", [MUTEX])
        restarted = _start("sweep", org.id, every.total_seconds())
        sixth = last + 6 * every
        _wait(lambda: _db_now() >= sixth + timedelta(seconds=0.3))
        lock.rollback()  # the sweepers may act again
        _wait(lambda: len(_ticks()) > len(before))
        time.sleep(0.5)  # a second pass within the same tick adds nothing
        after = _ticks()
        state = _state()
    finally:
        lock.close()
        out = _stop(restarted) if restarted else ""
    new = after[len(before) :]
    assert len(new) == 1, (new, out)
    # The catch-up is the latest due tick; the ticks before it are counted, never enqueued.
    assert state.skipped == int((new[0] - last) / every) - 1, out
    assert new[0] == sixth and state.skipped == 5, (new, state.skipped, out)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("cron", "error: schedule 'bad-one': cron '61 * * * *': Bad minute"),
        ("every", "error: schedule 'bad-one': every must be positive (got 0:00:00)"),
        ("kind", "error: schedule 'bad-one': kind: unknown work kind 'NO_SUCH_KIND'"),
    ],
)
@pytest.mark.parametrize("command", ["sweep", "runworker"])
def test_a_bad_schedule_stops_the_process_at_start_in_one_line(
    command: str, bad: str, says: str
) -> None:
    args = ["sweep", "--once"] if command == "sweep" else ["runworker", "NOOP", "--once"]
    proc = subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(WORKER_HANDLER_MODULES="tests.runtime.bad_schedules", BAD_SCHEDULE=bad),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says), proc.stderr
