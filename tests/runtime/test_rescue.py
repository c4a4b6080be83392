"""Fast rescue against real processes: ``runworker`` processes killed, frozen and cut off from
their liveness session, with ``manage.py sweep`` running beside them.

A killed worker's items go back within seconds (its liveness lock is free the moment its
process dies), not after their lease; a frozen one keeps its items as long as its lease holds
them; a live worker whose liveness session is terminated fences itself (its handlers cancelled)
so no two runs of an item overlap, and claims again. The times measured are printed (``-s``),
not asserted beyond a generous bound: the benchmark machine is shared.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from tenancy.contexts import OpContext
from tests.runtime.subprocess_kinds import MARKED, marks
from tests.runtime.support import PYTHON, ROOT, crash_tracebacks, subprocess_env
from workers.models import Worker
from workqueue import api
from workqueue.models import Attempt, Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")


class Procs:
    """The test's processes, each writing to a log file of its own; all stopped at the end."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        log = self.logs / f"proc-{len(self.started)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [PYTHON, "manage.py", *args],
                cwd=ROOT,
                env=subprocess_env(handlers=True, LOG_LEVEL="INFO", **env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.started.append((proc, log))
        return proc

    def worker(self, **env: str) -> subprocess.Popen[bytes]:
        return self.start(
            "runworker",
            MARKED.name,
            "--metrics-port",
            "-1",
            WORKER_SWEEP="false",
            WORKER_POLL_INTERVAL_MS="200",
            **env,
        )

    def sweeper(self, **env: str) -> subprocess.Popen[bytes]:
        return self.start("sweep", **env)

    def output(self, proc: subprocess.Popen[bytes]) -> str:
        log = next(log for p, log in self.started if p is proc)
        return log.read_text(errors="replace")

    def stop_all(self) -> None:
        for proc, _ in self.started:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.started:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    found = Procs(tmp_path)
    try:
        yield found
    finally:
        found.stop_all()


def _wait(predicate: Callable[[], Any], timeout_s: float = 60, step_s: float = 0.05) -> float:
    """Wait until ``predicate()`` holds; returns how long it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if predicate():
            return time.monotonic() - started
        time.sleep(step_s)
    raise AssertionError("timed out")


def _items(**filters: Any) -> list[WorkItem]:
    return list(WorkItem.objects.using("admin").filter(**filters))


def _db_now() -> Any:
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def _worker_id(proc: subprocess.Popen[bytes]) -> str:
    """The worker id of ``proc`` (host:pid:suffix), once its row holds a liveness lock."""
    found: list[str] = []

    def locked() -> bool:
        found[:] = (
            Worker.objects.using("admin")
            .filter(id__contains=f":{proc.pid}:", lock_key__isnull=False)
            .values_list("id", flat=True)
        )
        return bool(found)

    _wait(locked)
    return found[0]


def _enqueue(ctx: OpContext, n: int, log: Path, **payload: Any) -> list[uuid.UUID]:
    return [api.enqueue(ctx, MARKED.name, {"log": str(log), **payload})[0].id for _ in range(n)]


def _outcomes(ids: list[uuid.UUID]) -> set[str]:
    return set(
        Attempt.objects.using("admin").filter(item_id__in=ids).values_list("outcome", flat=True)
    )


def test_a_killed_workers_items_run_again_within_seconds_not_a_lease(
    ctx, procs: Procs, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    ids = _enqueue(ctx, 3, log, first_seconds=120)
    # The sweep's own passes are half a minute apart: the rescue runs on its own timer.
    procs.sweeper(SWEEP_INTERVAL_S="30")
    first = procs.worker(WORKER_LEASE_S="30")
    _wait(lambda: len(_items(status=Status.CLAIMED)) == 3)
    dead = _worker_id(first)
    second = procs.worker(WORKER_LEASE_S="30")
    _worker_id(second)  # up, and holding its own lock

    killed_at = _db_now()
    first.send_signal(signal.SIGKILL)
    first.wait()
    took_s = _wait(lambda: len(_items(status=Status.DONE)) == 3, timeout_s=60)

    done = _items(id__in=ids)
    assert {i.attempts for i in done} == {2}  # the killed attempt counted
    rescued = list(Attempt.objects.using("admin").filter(item_id__in=ids, attempt=1))
    assert {(a.outcome, a.worker) for a in rescued} == {("holder_gone", dead)}
    back_s = sorted((a.ended_at - killed_at).total_seconds() for a in rescued)
    runs = [m for m in marks(str(log)) if m[1] == 2]
    assert {m[2] for m in runs} == {second.pid} and len([m for m in runs if m[3] == "end"]) == 3
    print(
        f"\nfast rescue: 3 items of a SIGKILLed worker (lease 30 s) handed back "
        f"{back_s[0]:.2f}-{back_s[-1]:.2f} s after the kill, all done again in {took_s:.2f} s"
    )
    # Generous: well inside the 30 s lease, whatever the machine's load.
    assert back_s[-1] < 15 and took_s < 15
    assert "holders_gone" in procs.output(procs.started[0][0])


def test_a_frozen_worker_keeps_its_items_while_its_lock_and_lease_hold_them(
    ctx, procs: Procs, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    ids = _enqueue(ctx, 2, log, seconds=1)
    procs.sweeper(SWEEP_INTERVAL_S="0.5")
    frozen = procs.worker(WORKER_LEASE_S="12")
    _wait(lambda: len(_items(status=Status.CLAIMED)) == 2)
    holder = _worker_id(frozen)
    frozen.send_signal(signal.SIGSTOP)
    # Frozen for many times the rescue's grace and interval, within its lease: nothing moves.
    stopped = time.monotonic()
    while time.monotonic() - stopped < 5:
        held = _items(id__in=ids, status=Status.CLAIMED, claimed_by=holder)
        assert len(held) == 2, "a frozen worker's items were handed back while its lock held"
        time.sleep(0.2)
    assert Worker.objects.using("admin").get(pk=holder).lock_lost_at is None
    frozen.send_signal(signal.SIGCONT)
    _wait(lambda: len(_items(id__in=ids, status=Status.DONE)) == 2, timeout_s=30)
    assert {i.attempts for i in _items(id__in=ids)} == {1}
    assert _outcomes(ids) == {"done"}


def test_a_frozen_worker_past_its_lease_loses_its_items_to_the_lease_not_before(
    ctx, procs: Procs, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    [item_id] = _enqueue(ctx, 1, log, first_seconds=6, seconds=0)
    procs.sweeper(SWEEP_INTERVAL_S="0.5")
    frozen = procs.worker(WORKER_LEASE_S="3")
    _wait(lambda: _items(id=item_id, status=Status.CLAIMED))
    _worker_id(frozen)
    frozen.send_signal(signal.SIGSTOP)
    time.sleep(0.5)  # a renewal on its way when the stop came has landed
    lease_ended = _items(id=item_id)[0].lease_expires_at
    _wait(lambda: Attempt.objects.using("admin").filter(item_id=item_id, attempt=1).exists())
    [handed_back] = Attempt.objects.using("admin").filter(item_id=item_id, attempt=1)
    # The lease's hand-back, not the rescue's, and not before the lease ended.
    assert handed_back.outcome == "lease_expired" and handed_back.ended_at >= lease_ended
    frozen.send_signal(signal.SIGCONT)
    # Woken, it claims the item again itself (often before its renewal finds the old claim
    # gone): the old claim's task is cancelled and writes nothing, and no report about the old
    # claim reaches the new one. Done once, on its second attempt.
    _wait(lambda: _items(id=item_id, status=Status.DONE), timeout_s=30)
    assert _items(id=item_id)[0].attempts == 2


def _holder_of_lock(worker_id: str) -> int | None:
    """The backend pid of the worker's liveness session, None while it holds no lock."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT l.pid FROM pg_locks l JOIN workqueue_workers_worker w"
            " ON ((l.classid::bigint << 32) | l.objid::bigint) = w.lock_key"
            " WHERE l.locktype = 'advisory' AND l.granted AND w.id = %s",
            [worker_id],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else None


def _liveness_backend(worker_id: str) -> int:
    """The backend pid of the worker's liveness session: the holder of its advisory lock."""
    pid = _holder_of_lock(worker_id)
    assert pid is not None, "the worker holds no liveness lock"
    return pid


def test_a_live_worker_cut_from_its_liveness_session_keeps_what_still_holds_and_claims_again(
    ctx, procs: Procs, tmp_path: Path
) -> None:
    """Its liveness session killed, the worker takes a new lock and goes on with the claims
    that still hold; the one taken from it meanwhile (its token changed) is cancelled, writes
    nothing, and runs again once its lease has passed, never beside its earlier run."""
    log = tmp_path / "runs.log"
    ids = _enqueue(ctx, 3, log, first_seconds=6, seconds=0.2)
    procs.sweeper(SWEEP_INTERVAL_S="0.5")
    worker = procs.worker(WORKER_LEASE_S="4")
    _wait(lambda: len([m for m in marks(str(log)) if m[3] == "start"]) == 3)
    worker_id = _worker_id(worker)
    taken, *kept = ids
    WorkItem.objects.using("admin").filter(pk=taken).update(claim_token=uuid.uuid4())
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [_liveness_backend(worker_id)])
    # The taken claim's handler saw its cancellation (by the liveness check or the renewal).
    _wait(lambda: any(m[0] == str(taken) and m[3] == "cancelled" for m in marks(str(log))))
    more = _enqueue(ctx, 2, log, seconds=0)
    _wait(lambda: len(_items(id__in=[*ids, *more], status=Status.DONE)) == 5, timeout_s=60)

    out = procs.output(worker)
    assert out.count("logger=workers.liveness_lock liveness_lost") >= 1, out
    assert not crash_tracebacks(out), out
    assert _liveness_backend(worker_id) != 0  # it holds a new lock
    runs: dict[str, dict[int, list[tuple[str, float]]]] = {}
    for i, attempt, _, what, at in marks(str(log)):
        runs.setdefault(i, {}).setdefault(attempt, []).append((what, at))
    # What still held ran once, to its end; the taken one ran again, after its first run.
    for item_id in kept:
        assert list(runs[str(item_id)]) == [1], runs[str(item_id)]
        assert "cancelled" not in {what for what, _ in runs[str(item_id)][1]}
    spans = sorted((min(t for _, t in r), max(t for _, t in r)) for r in runs[str(taken)].values())
    assert len(spans) >= 2, runs[str(taken)]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), runs[str(taken)]


def test_a_worker_without_a_lock_waits_for_its_lease_as_an_older_release_does(
    ctx, procs: Procs, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    ids = _enqueue(ctx, 2, log, first_seconds=120)
    procs.sweeper(SWEEP_INTERVAL_S="0.5")
    old = procs.worker(WORKER_LEASE_S="5", WORKER_LIVENESS_LOCK="false")
    _wait(lambda: len(_items(status=Status.CLAIMED)) == 2)
    assert Worker.objects.using("admin").get(id__contains=f":{old.pid}:").lock_key is None
    lease_ends = max(i.lease_expires_at for i in _items(id__in=ids))
    old.send_signal(signal.SIGKILL)
    old.wait()
    # Nothing goes back before the lease ends.
    while _db_now() < lease_ends:
        assert len(_items(id__in=ids, status=Status.CLAIMED)) == 2
        time.sleep(0.2)
    _wait(lambda: len(_items(id__in=ids, status=Status.PENDING)) == 2, timeout_s=30)
    assert _outcomes(ids) == {"lease_expired"}


def test_a_long_item_whose_workers_sessions_are_killed_three_times_runs_once(
    ctx, procs: Procs, tmp_path: Path
) -> None:
    """A connection blip (a pooler restart, a failover) must not cost a long item its run:
    the worker's liveness session killed three times while nothing else claims the item, the
    item runs once, to its end. The grace is the one a deployment that expects blips gives
    (5 s): with the default 1 s a worker on a busy machine may not reconnect in time, and then
    it fences the item, as it must, and the item runs again."""
    log = tmp_path / "runs.log"
    [item_id] = _enqueue(ctx, 1, log, first_seconds=15)
    procs.sweeper(SWEEP_INTERVAL_S="0.5", SWEEP_RESCUE_GRACE_S="5")
    worker = procs.worker(WORKER_LEASE_S="8", SWEEP_RESCUE_GRACE_S="5")
    _wait(lambda: any(m[3] == "start" for m in marks(str(log))))
    worker_id = _worker_id(worker)
    for _ in range(3):  # each time once it holds its lock again
        backend = _liveness_backend(worker_id)
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
        _wait(lambda b=backend: _holder_of_lock(worker_id) not in (None, b), timeout_s=30)
    _wait(lambda: _items(id=item_id, status=Status.DONE) != [], timeout_s=120)
    runs = {attempt for i, attempt, *_ in marks(str(log)) if i == str(item_id)}
    print(f"a long item, its worker's liveness session killed 3 times: re-runs {len(runs) - 1}")
    assert not crash_tracebacks(procs.output(worker))
    assert len(runs) == 1, runs
