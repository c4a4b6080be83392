"""A deployment as operators run it: real ``runworker`` and ``sweep`` processes, killed, doubled
on a host, misconfigured (issues 8 and 10)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import urllib.request

import pytest
from django.db import connections

from outbox.emit import emit
from tests.runtime.subprocess_kinds import SLOW_ONCE
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue import api
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")


def _runworker(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", *args],
        cwd=ROOT,
        env=subprocess_env(handlers=True, WORKER_METRICS_HOST="127.0.0.1", **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(predicate, timeout_s: float = 30, step_s: float = 0.05) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step_s)
    raise AssertionError("timed out")


def _items(**filters) -> list[WorkItem]:  # type: ignore[no-untyped-def]
    return list(WorkItem.objects.using("admin").filter(**filters))


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def test_a_killed_workers_items_are_finished_by_another_runworker(ctx) -> None:
    """Issue 8.8 / 10: after SIGKILL the items stay claimed until the second worker's own
    sweep hands them back (its rescue, the killed worker's liveness lock being free, or its
    lease, whichever comes first: tests/runtime/test_rescue.py times the rescue) and runs them;
    each attempt was counted."""
    ids = [api.enqueue(ctx, SLOW_ONCE.name, {"first_attempt_s": 60})[0].id for _ in range(3)]
    first = _runworker(SLOW_ONCE.name, "--metrics-port", "-1", WORKER_LEASE_S="2")
    try:
        _wait(lambda: len(_items(status=Status.CLAIMED)) == 3)
    finally:
        first.kill()
        first.communicate()  # reaps it and closes its output pipe
    assert {i.attempts for i in _items()} == {1}
    second = _runworker(
        SLOW_ONCE.name, "--metrics-port", "-1", WORKER_LEASE_S="2", SWEEP_INTERVAL_S="0.5"
    )
    try:
        _wait(lambda: len(_items(status=Status.DONE)) == 3, timeout_s=30)
    finally:
        out = _stop(second)
    done = {i.id: i for i in _items()}
    assert set(done) == set(ids)
    assert {i.attempts for i in done.values()} == {2}  # the killed attempt counted
    assert "held_requeued" in out or "stale_requeued" in out


def test_the_notify_path_relays_the_outbox_at_once_with_the_sweep_off(ctx) -> None:
    worker = _runworker("NOOP", "--metrics-port", "-1", WORKER_SWEEP="false")
    try:
        _wait(lambda: "worker_started" in _peek(worker), timeout_s=30)
        time.sleep(0.5)  # LISTEN is up
        took = []
        for i in range(5):
            row_id = emit(ctx, "work.NOOP", {"n": i})  # autocommit: committed on return
            started = time.monotonic()
            _wait(lambda row_id=row_id: _items(pk=row_id), timeout_s=10, step_s=0.002)
            took.append(time.monotonic() - started)
        _wait(lambda: len(_items(status=Status.DONE)) == 5)
    finally:
        _stop(worker)
    # With the sweep off only the notice relays (each about a millisecond on a quiet machine):
    # a bound a loaded machine holds too, far under any timer's.
    assert max(took) < 5.0, took


_PEEKED: dict[int, str] = {}


def _peek(proc: subprocess.Popen[str]) -> str:
    """What the process printed so far (read without blocking on a pipe it still holds)."""
    import os
    import select

    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        _PEEKED[proc.pid] = _PEEKED.get(proc.pid, "") + chunk.decode(errors="replace")
    return _PEEKED.get(proc.pid, "")


def test_two_workers_run_on_one_host_with_the_defaults() -> None:
    """Issue 8.12: the second takes the next free metrics port instead of dying."""
    env = {"WORKER_METRICS_PORT": ""}
    first = _runworker("NOOP", **env)
    second = _runworker("NOOP", **env)
    ports = []
    try:
        for proc in (first, second):
            _wait(lambda proc=proc: "worker_started" in _peek(proc), timeout_s=30)
            match = re.search(r"worker_started .* metrics_port=(\d+)", _peek(proc))
            assert match, _peek(proc)
            ports.append(int(match.group(1)))
        assert ports[0] != ports[1] and all(9100 <= p < 9200 for p in ports)
        for port in ports:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                assert r.status == 200
    finally:
        outs = [_peek(proc) + _stop(proc) for proc in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, outs


def test_an_explicit_port_that_is_taken_is_one_line() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [PYTHON, "manage.py", "runworker", "NOOP", "--metrics-port", str(port)],
            cwd=ROOT,
            env=subprocess_env(WORKER_METRICS_HOST="127.0.0.1"),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"WORKER_METRICS_PORT {port}" in lines[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["NOOP", "--lane", ""], "--lane/WORKER_LANE: must be a non-empty string"),
        (["NOOP", "--lane", "x" * 51], "--lane/WORKER_LANE: must be 1 to 50"),
        (["NOOP", "--metrics-port", "99999"], "--metrics-port/WORKER_METRICS_PORT: must be a port"),
        (["NOPE"], "unknown kind 'NOPE'"),
    ],
)
def test_runworker_refuses_bad_options_in_one_line(args: list[str], says: str) -> None:
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], done.stderr


def _sweep_once(**env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "manage.py", "sweep", "--once"],
        cwd=ROOT,
        env=subprocess_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _sweep_lock_held() -> bool:
    """Whether some sweeper holds the sweep's mutex: a session sits in the transaction that
    locked its row. Read from pg_stat_activity, so the check takes no lock itself (a probe that
    locked the row, even for a moment, could make the sweeper it watches skip its pass)."""
    with connections["admin"].cursor() as cursor:
        # The caller is inside a transaction, which would keep reading its first snapshot.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'idle in transaction' AND query LIKE %s",
            ["%FROM workqueue_mutex WHERE name = % FOR UPDATE SKIP LOCKED%"],
        )
        return bool(cursor.fetchone()[0])


def test_two_sweepers_at_once_exactly_one_acts(ctx, worker_rctx) -> None:
    """The first sweeper is held inside its pass (a session row it must delete is locked by
    this test); the second, started meanwhile, skips the pass."""
    from datetime import timedelta

    from django.contrib.sessions.backends.db import SessionStore
    from django.contrib.sessions.models import Session
    from django.db import transaction

    held = SessionStore()
    held.create()
    Session.objects.using("admin").update(
        expire_date=Session.objects.using("admin").get().expire_date - timedelta(days=30)
    )
    with transaction.atomic(using="admin"), connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM django_session WHERE session_key = %s FOR UPDATE", [held.session_key]
        )
        first = _sweep_once()
        _wait(_sweep_lock_held, timeout_s=30)
        second = _sweep_once()
        second_out, _ = second.communicate(timeout=60)
    first_out, _ = first.communicate(timeout=60)
    assert "sweep skipped: another sweeper holds the lock" in second_out
    assert "purge_sessions: expired sessions purged: 1" in first_out, first_out
    assert first.returncode == 0 and second.returncode == 0


def test_sweep_once_as_a_subprocess_and_a_bad_setting_in_one_line(ctx) -> None:
    ok = _sweep_once()
    out, _ = ok.communicate(timeout=60)
    assert ok.returncode == 0 and out.splitlines()[-1].startswith("sweep took ")
    bad = _sweep_once(ITEM_RETENTION_S="-5")
    out, _ = bad.communicate(timeout=60)
    assert bad.returncode != 0 and "Traceback" not in out
    lines = [line for line in out.splitlines() if line.strip()]
    # The environment variable is the setting's name (project/environment.py).
    assert len(lines) == 1, lines
    assert "WORKQUEUE['ITEM_RETENTION_S']: Input should be greater than or equal to 0" in lines[0]
