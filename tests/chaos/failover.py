"""The failover scenario's parts: the producer, the workers, the crash and the promotion, the
journal, and what it all comes to (``tests/chaos/test_failover.py`` runs it).

Every query of this process goes through its Django aliases, which the test points at the pair
through the multi-host URL: after the crash they reconnect to whichever server takes writes.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import close_old_connections, connections

from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tests import replication
from tests.chaos import owner, tables
from tests.chaos.failover_kinds import FAILOVER, JOURNAL_ENV
from tests.chaos.owner import DOWN
from tests.factories import MembershipFactory
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue.api import NewItem, enqueue_many

WORKERS = 3
PREFILL = 240
SLEEP_S = 0.4  # each item's handler, between its read and its write
SLOW_EVERY, SLOW_S = 8, 2.5  # and every 8th for longer: still running well after the promotion
PRODUCE_EVERY_S = 0.1  # a batch of PRODUCE_BATCH, with idempotency keys, retried until stored
PRODUCE_BATCH = 2
KILL_AFTER_S = 3.0  # into the drain
DETECT_S = 0.5  # from the crash to the promotion, as a failover manager takes to decide
PRODUCE_AFTER_S = 3.0  # the producer goes on this long after the promotion
DRAIN_TIMEOUT_S = 40.0
LEASE_S = 6.0

# The defaults but for the lease and the sweep's interval, shortened so that the items
# mid-handler at the crash (which wait for their lease) come back within the test's time.
WORKER_ENV = {
    "WORKER_HANDLER_MODULES": "tests.chaos.failover_kinds",
    "WORKER_LEASE_S": str(LEASE_S),
    "SWEEP_INTERVAL_S": "1",
    "WORKER_SHUTDOWN_GRACE_S": "5",
    "WORKER_METRICS_PORT": "0",
    "WORKER_METRICS_HOST": "127.0.0.1",
    "LOG_LEVEL": "INFO",
}


def query(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` as the owner, waiting out the failover (30 s at most)."""
    return owner.query(sql, params, timeout_s=30.0)


def _payload(n: int) -> dict[str, Any]:
    return {"n": n, "sleep_s": SLOW_S if n % SLOW_EVERY == 0 else SLEEP_S}


# -- the producer: a web process's enqueues ----------------------------------------------------


@dataclass
class Producer:
    ctxs: list[OpContext]
    stop: threading.Event = field(default_factory=threading.Event)
    # Keys whose enqueue was acknowledged; calls that failed (retried with the same keys).
    acknowledged: list[str] = field(default_factory=list)
    failures: int = 0

    def run(self) -> None:
        batch = 0
        try:
            while not self.stop.is_set():
                keys = [f"p{batch}-{i}" for i in range(PRODUCE_BATCH)]
                items = [
                    NewItem(FAILOVER.name, _payload(batch * PRODUCE_BATCH + i), idempotency_key=k)
                    for i, k in enumerate(keys)
                ]
                if self._store(self.ctxs[batch % len(self.ctxs)], items):
                    self.acknowledged += keys
                batch += 1
                time.sleep(PRODUCE_EVERY_S)
        finally:
            connections.close_all()

    def _store(self, ctx: OpContext, items: list[NewItem]) -> bool:
        """Enqueue ``items`` until acknowledged (a retry meets the keys a lost answer stored)."""
        while not self.stop.is_set():
            close_old_connections()  # as Django does before each request
            try:
                enqueue_many(ctx, items)
                return True
            except DOWN:
                self.failures += 1
                time.sleep(0.1)
        return False


# -- the workers -------------------------------------------------------------------------------


@dataclass
class Worker:
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def worker_id(self) -> str | None:
        found = re.search(r'worker_started worker="?([^" ]+)', self.output())
        return found.group(1) if found else None


def start_workers(folder: Path, journal: Path) -> list[Worker]:
    """``WORKERS`` runworker processes on the aliases' URLs (the multi-host ones)."""
    env = subprocess_env(**WORKER_ENV, **{JOURNAL_ENV: str(journal)})
    workers = []
    for n in range(WORKERS):
        log = folder / f"worker-{n}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [PYTHON, "manage.py", "runworker", FAILOVER.name],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        workers.append(Worker(popen, log))
    return workers


def stop_workers(workers: list[Worker]) -> list[int | None]:
    """SIGTERM each (a drain); returns their exit codes."""
    for worker in workers:
        if worker.popen.poll() is None:
            worker.popen.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.popen.kill()
            worker.popen.wait()
    return [worker.popen.returncode for worker in workers]


# -- the journal -------------------------------------------------------------------------------


@dataclass
class Run:
    attempt: int
    token: str
    started: float
    ended: float | None = None
    outcome: str = ""
    told: float | None = None  # when it saw itself cancelled (tests/chaos/cut_kinds.py)


def read_journal(path: Path) -> dict[str, list[Run]]:
    """Each item's runs, in the order they started."""
    runs: dict[str, dict[str, Run]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        item, attempt, token, _pid, event, at = line.split()
        run = runs[item].setdefault(token, Run(int(attempt), token, float(at)))
        if event == "end":
            run.ended = float(at)
        elif event == "told":
            run.told = float(at)
        elif event != "start":
            run.outcome = event
    return {item: sorted(by.values(), key=lambda r: r.started) for item, by in runs.items()}


# -- the scenario ------------------------------------------------------------------------------


@dataclass
class Outcome:
    killed_at: float  # Unix time, as the journal's
    promoted_at: float
    claimed_at_kill: int
    producer: Producer
    workers: list[Worker]
    exit_codes: list[int | None]
    runs: dict[str, list[Run]]


def tenant() -> OpContext:
    member = MembershipFactory(role=Role.MEMBER)
    return OpContext(
        member.org_id, str(member.user_id), member.role, new_request_context(AppType.WEB)
    )


def hold_back_wal() -> int:
    """Stop the primary's WAL sender (SIGSTOP): from now on the standby receives nothing, as
    a standby that lags behind. Returns its pid, to kill with the primary."""
    [(pid,)] = query("SELECT pid FROM pg_stat_replication")
    os.kill(int(pid), signal.SIGSTOP)
    return int(pid)


def fail_over(pair: replication.Pair, folder: Path, lag_s: float) -> Outcome:
    """Drain with the producer enqueuing; ``KILL_AFTER_S`` in (and ``lag_s`` after the standby
    stopped receiving, when asynchronous) SIGKILL the primary's postmaster, promote the standby
    ``DETECT_S`` later; wait until the new primary has nothing pending or claimed."""
    tables.create()
    ctxs = [tenant(), tenant()]
    for start in range(0, PREFILL, 60):
        items = [NewItem(FAILOVER.name, _payload(n)) for n in range(start, start + 60)]
        enqueue_many(ctxs[start // 60 % 2], items)
    journal = folder / "journal.txt"
    journal.touch()
    workers = start_workers(folder, journal)
    producer = Producer(ctxs)
    thread = threading.Thread(target=producer.run, name="producer")
    began = time.monotonic()
    try:
        while not query("SELECT count(*) FROM workqueue_workitem WHERE status = 'done'")[0][0]:
            assert time.monotonic() - began < 60, "the workers never completed an item"
            time.sleep(0.1)
        thread.start()
        time.sleep(KILL_AFTER_S)
        sender = hold_back_wal() if lag_s else None
        time.sleep(lag_s)
        [(claimed_at_kill,)] = query(
            "SELECT count(*) FROM workqueue_workitem WHERE status = 'claimed'"
        )
        killed_at = time.time()
        pair.primary.kill()
        if sender is not None:
            os.kill(sender, signal.SIGKILL)
        time.sleep(DETECT_S)
        pair.standby.promote()
        promoted_at = time.time()
        time.sleep(PRODUCE_AFTER_S)
        producer.stop.set()
        thread.join(timeout=30)
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while query(
            "SELECT count(*) FROM workqueue_workitem WHERE status IN ('pending', 'claimed')"
        )[0][0]:
            assert time.monotonic() < deadline, "items never finished after the failover"
            time.sleep(0.2)
    finally:
        producer.stop.set()
        if thread.is_alive():
            thread.join(timeout=30)
        codes = stop_workers(workers)
    return Outcome(
        killed_at,
        promoted_at,
        claimed_at_kill,
        producer,
        workers,
        codes,
        read_journal(journal),
    )


# -- what it comes to --------------------------------------------------------------------------


@dataclass
class Findings:
    items: int
    not_done: int  # on the new primary, at the end
    without_effect: int  # done, but its record not advanced
    enqueues_lost: int  # acknowledged to the producer, unknown to the new primary
    claims_forgotten: int  # items whose attempt number two claims were given
    ran_again_after_effect: int  # an item whose run applied its effect ran again after it
    doubled: int  # items whose effect was committed twice
    overlapping: int  # items two runs of which were live at once
    refused_cas: int  # record writes the compare-and-set refused
    failed_writes: int  # runs whose statements failed (the old primary went away under them)
    refused_settles: int  # queue writes the claim token refused (the workers' lines)
    resume_s: list[float]  # per worker: promotion to its first completion after it
    rerun_after_s: float | None  # the crash to the last new run of an item running at it
    tracebacks: int
    lines: dict[str, list[int]]  # per worker, how often it said each of _SAID


_REFUSED = ("stale_complete_refused", "stale_fail_refused", "stale_release_refused")
SAID = ("database_unreachable", "database_back", "liveness_lost")


def _per_item(runs: dict[str, list[Run]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for item_runs in runs.values():
        attempts = Counter(r.attempt for r in item_runs)
        counts["forgotten"] += any(n > 1 for n in attempts.values())
        counts["doubled"] += sum(r.outcome == "applied" for r in item_runs) > 1
        counts["refused"] += sum(r.outcome == "refused" for r in item_runs)
        counts["failed"] += sum(r.outcome == "error" for r in item_runs)
        counts["overlapping"] += _overlap(item_runs)
        applied = [r.ended for r in item_runs if r.outcome == "applied" and r.ended]
        counts["again"] += bool(applied) and any(r.started > min(applied) for r in item_runs)
    return counts


def _overlap(item_runs: list[Run]) -> bool:
    """Whether a run started before an earlier one had ended (one never ended: still runs)."""
    ended_by = float("-inf")
    for run in item_runs:
        if run.started < ended_by:
            return True
        ended_by = max(ended_by, run.ended or float("inf"))
    return False


def _rerun_after_s(runs: dict[str, list[Run]], killed_at: float) -> float | None:
    """How long after the crash the items then mid-handler started again (the last of them)."""
    waits = []
    for item_runs in runs.values():
        running = [r for r in item_runs if r.started < killed_at < (r.ended or float("inf"))]
        later = [r.started for r in item_runs if r.started > killed_at]
        if running and later:
            waits.append(min(later) - killed_at)
    return max(waits) if waits else None


def findings(outcome: Outcome) -> Findings:
    items = query("SELECT idempotency_key, status FROM workqueue_workitem")
    keys = {key for key, _ in items if key is not None}
    not_done = sum(status != "done" for _, status in items)
    [(without_effect,)] = query(
        "SELECT count(*) FROM workqueue_workitem w WHERE NOT EXISTS ("
        " SELECT 1 FROM chaos_effect e WHERE e.item_id = w.id AND e.version = 1)"
    )
    per_item = _per_item(outcome.runs)
    promoted = datetime.fromtimestamp(outcome.promoted_at, UTC)
    resume = []
    for worker in outcome.workers:
        [(first,)] = query(
            "SELECT min(ended_at) FROM workqueue_attempt WHERE worker = %s AND outcome = 'done'"
            " AND ended_at > %s",
            [worker.worker_id(), promoted],
        )
        if first is not None:
            resume.append(first.timestamp() - outcome.promoted_at)
    said = [worker.output() for worker in outcome.workers]
    return Findings(
        items=len(items),
        not_done=not_done,
        without_effect=without_effect,
        enqueues_lost=sum(key not in keys for key in outcome.producer.acknowledged),
        claims_forgotten=per_item["forgotten"],
        ran_again_after_effect=per_item["again"],
        doubled=per_item["doubled"],
        overlapping=per_item["overlapping"],
        refused_cas=per_item["refused"],
        failed_writes=per_item["failed"],
        refused_settles=sum(text.count(marker) for text in said for marker in _REFUSED),
        resume_s=sorted(resume),
        rerun_after_s=_rerun_after_s(outcome.runs, outcome.killed_at),
        tracebacks=sum(text.count("Traceback") for text in said),
        lines={event: [text.count(f" {event} ") for text in said] for event in SAID},
    )
