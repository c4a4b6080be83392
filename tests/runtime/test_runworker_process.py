"""A real ``manage.py runworker`` process, stopped by real signals or an operator's stop."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from audit.api import AuditEntry
from tests.runtime.support import PYTHON, ROOT, count, subprocess_env
from workers import fleet
from workers.models import Worker as WorkerRow
from workers.models import WorkerState
from workqueue import api
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(port: int, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "NOOP", "--metrics-port", str(port)],
        cwd=ROOT,
        env=subprocess_env(
            WORKER_HEARTBEAT_INTERVAL_S="0.2", WORKER_METRICS_HOST="127.0.0.1", **env
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(predicate, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _healthz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
            return response.status
    except OSError:
        return 0


def test_sigterm_mid_item_releases_it_with_a_note_and_goes_offline(ctx) -> None:
    slow, _ = api.enqueue(ctx, "NOOP", {"sleep_s": 60})
    quick = [api.enqueue(ctx, "NOOP", {"n": i})[0] for i in range(20)]
    port = _free_port()
    proc = _start(port, WORKER_SHUTDOWN_GRACE_S="1")
    try:
        _wait(lambda: count(status=Status.DONE) == 20 and count(status=Status.CLAIMED) == 1)
        _wait(lambda: _healthz(port) == 200)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    stored = WorkItem.objects.using("admin").get(pk=slow.id)
    assert (stored.status, stored.attempts) == (Status.PENDING, 0)
    assert "shut down before it finished" in stored.last_error
    assert count(status=Status.DONE, id__in=[q.id for q in quick]) == 20  # nothing lost
    [row] = WorkerRow.objects.using("admin").all()
    assert row.state == WorkerState.OFFLINE and row.kind == "NOOP"
    assert "worker_offline" in output


def test_a_second_signal_cuts_the_grace_short_and_still_releases(ctx) -> None:
    slow, _ = api.enqueue(ctx, "NOOP", {"sleep_s": 60})
    port = _free_port()
    proc = _start(port, WORKER_SHUTDOWN_GRACE_S="120")
    try:
        _wait(lambda: count(status=Status.CLAIMED) == 1)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert proc.poll() is None  # draining: the grace is two minutes
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    stored = WorkItem.objects.using("admin").get(pk=slow.id)
    assert (stored.status, stored.attempts) == (Status.PENDING, 0)


def test_an_operators_stop_cancels_what_runs_releases_it_and_goes_offline(ctx) -> None:
    slow, _ = api.enqueue(ctx, "NOOP", {"sleep_s": 60})
    port = _free_port()
    proc = _start(port, WORKER_SHUTDOWN_GRACE_S="120")
    try:
        _wait(lambda: count(status=Status.CLAIMED) == 1)
        [row] = WorkerRow.objects.using("admin").all()
        assert fleet.stop(row.id, actor="operator-1", request_id=None, via="a test")
        # At its next heartbeat (0.2 s): no two-minute grace, as at a second SIGTERM.
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    stored = WorkItem.objects.using("admin").get(pk=slow.id)
    assert (stored.status, stored.attempts) == (Status.PENDING, 0)
    row.refresh_from_db()
    assert row.state == WorkerState.OFFLINE
    assert "worker_stop_requested" in output
    entry = AuditEntry.objects.using("admin").get(action="worker.stop_requested")
    assert (entry.subject_id, entry.actor) == (row.id, "operator-1")


def test_runworker_refuses_a_wrong_setting_with_one_line() -> None:
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", "NOPE"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "unknown kind 'NOPE'" in done.stderr


def test_runworker_checks_capacity_against_its_pool() -> None:
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", "NOTIFY_SHIPMENT", "--capacity", "50"],
        cwd=ROOT,
        env=subprocess_env(WORKER_DB_POOL_SIZE="20"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    from workers.config import WorkerSettings

    # The worker's own connections are derived from what it opens (workers/config.py).
    room = 20 - WorkerSettings(kinds=("NOTIFY_SHIPMENT",)).connections.own()
    assert f"lower --capacity to {room} or raise WORKER_DB_POOL_SIZE" in done.stderr


def test_runworker_once_runs_what_is_there_and_exits(ctx) -> None:
    for i in range(30):
        api.enqueue(ctx, "NOOP", {"n": i})
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", "NOOP", "--once", "--metrics-port", "0"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert count(status=Status.DONE) == 30


def _run_once(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "manage.py", "runworker", *args, "--once", "--metrics-port", "0"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("named", [(), ("*",)])
def test_runworker_with_no_kinds_runs_every_handled_kind(ctx, named) -> None:
    from tenancy.current import using_context
    from tests import tasks

    noop, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    with using_context(ctx):
        added = tasks.add.enqueue(2, 3)
    done = _run_once(*named)
    assert done.returncode == 0, done.stderr
    assert WorkItem.objects.using("admin").get(pk=noop.id).status == Status.DONE
    assert WorkItem.objects.using("admin").get(pk=added.id).status == Status.DONE
    # Its liveness row declares the kinds it ran (and every other handled kind).
    declared = WorkerRow.objects.using("admin").latest("started_at").kind
    assert {noop.kind, "DJANGO_TASK"} <= set(declared.split(","))


def test_runworker_exclude_leaves_a_kind_pending(ctx) -> None:
    from tenancy.current import using_context
    from tests import tasks

    noop, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    with using_context(ctx):
        added = tasks.add.enqueue(2, 3)
    done = _run_once("--exclude", "NOOP")
    assert done.returncode == 0, done.stderr
    assert WorkItem.objects.using("admin").get(pk=noop.id).status == Status.PENDING
    assert WorkItem.objects.using("admin").get(pk=added.id).status == Status.DONE


def test_runworker_refuses_an_exclude_it_does_not_know() -> None:
    done = _run_once("--exclude", "NOPE")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--exclude 'NOPE': no such handled kind (" in done.stderr


def test_a_workers_connections_say_its_role_and_process() -> None:
    """Its own (worker), its LISTEN session (listener), its sweep's (sweep: the in-process
    sweep's thread and its mutex); none left open unnamed, and none from the start-up checks."""
    from django.db import connections

    port = _free_port()
    proc = _start(port)
    names: list[str] = []

    def named() -> bool:
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT application_name, query FROM pg_stat_activity WHERE application_name"
                " LIKE %s",
                [f"workqueue % %:{proc.pid}"],
            )
            rows = cursor.fetchall()
        names[:] = [name.split()[1] for name, _ in rows]
        assert not [q for _, q in rows if "pg_extension" in q]  # the checks' sessions: closed
        return names.count("worker") >= 2 and {"listener", "sweep"} <= set(names)

    try:
        _wait(lambda: _healthz(port) == 200)
        _wait(named)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
