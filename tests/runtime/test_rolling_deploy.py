"""A deploy while work goes on: ``migrate`` and ``grant_logins`` run again and again (a rolling
restart runs them from each new release) while a real ``runworker`` drains and a producer
enqueues. Neither may meet a moment without its rights: no permission error, nothing lost."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from django.db import connections

from tenancy.contexts import OpContext
from tests.runtime.support import PYTHON, ROOT, count, subprocess_env
from workqueue import api
from workqueue.models import Status

pytestmark = pytest.mark.usefixtures("committed")


def _produce(ctx: OpContext, stop: threading.Event, made: list[int], errors: list[str]) -> None:
    """Enqueue batches of 20 until ``stop``, as a web process would (its own connection)."""
    try:
        while not stop.is_set():
            try:
                outcomes = api.enqueue_many(ctx, [api.NewItem("NOOP", {}) for _ in range(20)])
                made.append(len(outcomes))
            except Exception as exc:  # counted, not raised: the test reports them all
                errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.01)
    finally:
        connections.close_all()


def _manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_migrate_and_grant_logins_under_a_live_worker_and_producer_refuse_nothing(
    ctx: OpContext,
) -> None:
    worker = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "NOOP"],
        cwd=ROOT,
        env=subprocess_env(WORKER_COMPLETE_FLUSH_MS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    stop = threading.Event()
    made: list[int] = []
    errors: list[str] = []
    producer = threading.Thread(target=_produce, args=(ctx, stop, made, errors))
    producer.start()
    try:
        for _ in range(3):
            for command in (("migrate", "--no-input"), ("grant_logins",)):
                done = _manage(*command)
                assert done.returncode == 0, done.stdout + done.stderr
    finally:
        stop.set()
        producer.join(timeout=30)
    try:
        deadline = time.monotonic() + 60
        while count(status=Status.DONE) < sum(made) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=30)
    assert errors == []
    assert sum(made) > 0
    assert count(status=Status.DONE) == sum(made), output  # nothing lost
    assert "permission denied" not in output, output
    assert "complete_failed" not in output and "Traceback" not in output, output
