"""An async handler that blocks its event loop keeps its lease, and the worker says so
(issue 18); a frozen worker still loses its items.

Real ``runworker`` processes with a 3 s lease run ``TEST_ROGUE`` (``tests/runtime/rogue_kinds.py``,
an async handler): ``time.sleep(8)`` on the loop must run once, in the worker that claimed it,
while a second worker sweeps and claims alongside; the first worker logs the blocked loop, naming
the item, and counts it on its ``/metrics``. A worker stopped with SIGSTOP stops its lease thread
too: the second worker takes its item after the lease, and the first, resumed, loses it.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tenancy.contexts import OpContext
from tests.runtime.rogue_kinds import ROGUE, runs
from tests.runtime.support import PYTHON, ROOT, subprocess_env, wait_until
from workqueue import api
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

LEASE_ENV = {
    "WORKER_HANDLER_MODULES": "tests.runtime.rogue_kinds",
    "WORKER_LEASE_S": "3",
    "WORKER_POLL_INTERVAL_MS": "50",
    "WORKER_HEARTBEAT_INTERVAL_S": "0.5",
    "WORKER_SHUTDOWN_GRACE_S": "1",
    "WORKER_METRICS_HOST": "127.0.0.1",
    "SWEEP_INTERVAL_S": "0.5",
    "LOG_LEVEL": "INFO",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(port: int, *, sweep: bool = True) -> subprocess.Popen[str]:
    """A worker; ``sweep=False`` for the first, whose loop is blocked or which is frozen: the
    second one's sweep hands back what a lapsed lease leaves (a worker frozen mid-sweep would
    hold the sweepers' mutex and stop every sweep)."""
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", ROGUE.name, "--metrics-port", str(port)],
        cwd=ROOT,
        env=subprocess_env(**LEASE_ENV, WORKER_SWEEP="true" if sweep else "false"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return response.read().decode()
    except OSError:
        return ""


def _stop(*procs: subprocess.Popen[str]) -> list[str]:
    """SIGTERM each (a drain), then their whole output."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=30)[0])
        finally:
            proc.kill()
    return outputs


def _stored(item_id: object) -> WorkItem:
    return WorkItem.objects.using("admin").get(pk=item_id)


def test_an_async_handler_blocking_its_loop_keeps_its_lease_and_runs_once(
    ctx: OpContext, tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    item, _ = api.enqueue(ctx, ROGUE.name, {"action": "block", "seconds": 8, "log": log})
    first_port, second_port = _free_port(), _free_port()
    first = _start(first_port, sweep=False)
    second = None
    try:
        wait_until(lambda: len(runs(log)) == 1)  # the first worker runs it, its loop blocked now
        second = _start(second_port)  # sweeping every 0.5 s, claiming what is due
        wait_until(lambda: "workqueue_worker_loop_blocked_total 1.0" in _metrics(first_port))
        wait_until(lambda: _stored(item.id).status == Status.DONE, timeout_s=60)
        # The episode's end: how long it lasted, observed once the loop ran again.
        wait_until(
            lambda: "workqueue_worker_loop_blocked_seconds_count 1.0" in _metrics(first_port)
        )
        # The second worker was up and sweeping through the rest of the 8 s (its /metrics).
        assert _metrics(second_port)
    finally:
        first_output, *others = _stop(first, *([second] if second else []))
        print(first_output, *others)  # shown when the test fails
    second_output = others[0]
    assert first.returncode == 0 and second.returncode == 0, first_output + second_output
    # Once, in the first worker, start to end; never in the second.
    assert [(i, a, p, what) for i, a, p, what in runs(log)] == [
        (str(item.id), 1, first.pid, "start"),
        (str(item.id), 1, first.pid, "end"),
    ]
    stored = _stored(item.id)
    assert (stored.status, stored.attempts) == (Status.DONE, 1)
    assert str(item.id) not in second_output
    # Told once, naming the item and where the loop is stuck; then how long it lasted.
    [blocked] = [line for line in first_output.splitlines() if "worker_loop_blocked" in line]
    assert "level=warning" in blocked and f'items="{item.id}:{ROGUE.name}"' in blocked
    assert "rogue_kinds.py" in blocked
    [unblocked] = [line for line in first_output.splitlines() if "worker_loop_unblocked" in line]
    match = re.search(r"blocked_s=([\d.]+)", unblocked)
    assert match and float(match[1]) >= 3  # well past the 3 s lease
    assert "item_lost" not in first_output


def test_a_frozen_worker_still_loses_its_item_to_another_after_the_lease(
    ctx: OpContext, tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    item, _ = api.enqueue(ctx, ROGUE.name, {"action": "sleep_first", "seconds": 60, "log": log})
    first_port = _free_port()
    first = _start(first_port, sweep=False)
    second = None
    try:
        wait_until(lambda: len(runs(log)) == 1)
        first.send_signal(signal.SIGSTOP)  # every thread stops, the lease keeper's too
        try:
            second = _start(_free_port())
            # After the lease, the second worker's sweep hands it back and it runs again there.
            wait_until(lambda: _stored(item.id).status == Status.DONE)
        finally:
            first.send_signal(signal.SIGCONT)
        # Resumed, the first worker's next renewal finds another holder (or, when the stop
        # caught a renewal in flight, its time ran out): its task is cancelled at once.
        wait_until(lambda: _cancelled(first_port) == 1)
    finally:
        first_output, *others = _stop(first, *([second] if second else []))
        print(first_output, *others)  # shown when the test fails
    assert second is not None
    assert [(a, p, what) for i, a, p, what in runs(log)] == [
        (1, first.pid, "start"),
        (2, second.pid, "start"),
        (2, second.pid, "end"),
    ]
    stored = _stored(item.id)
    assert (stored.status, stored.attempts) == (Status.DONE, 2)
    assert re.search(
        f'item_lost item="{item.id}" .*reason="(conflict|renewal_failing)"', first_output
    )
    # Resumed, the process does not mistake its own stop for a blocked loop.
    assert "worker_loop_blocked" not in first_output


def _cancelled(port: int) -> float:
    """Items the worker on ``port`` cancelled because it lost them (its /metrics)."""
    found = re.findall(
        rf'workqueue_worker_cancelled_total{{kind="{ROGUE.name}",'
        r'reason="(?:conflict|renewal_failing)"} ([\d.]+)',
        _metrics(port),
    )
    return sum(float(n) for n in found)
