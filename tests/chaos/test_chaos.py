"""Proof under faults: real ``runworker`` processes work through 5,000 items while the test
kills them, cuts every database connection, freezes one past its lease, and restarts PostgreSQL
itself in immediate mode. Some of the items are workflows' steps (chains, and groups with their
callbacks). At the end every item is done exactly once in effect, nothing is left claimed or
waiting, no step ran before the steps it waits for were done, stale writes were refused, and
each poison item is a dead letter after exactly ``max_attempts`` claims, its attempts counted
across the crash.

The fleet is deployed as operators run it (each worker sweeps), with a short lease. Work
becomes due across a window (``available_at``) so the faults land while items run; a share
arrives through the outbox during the faults. Every fault is a real one: signals, the
database's own ``pg_terminate_backend``, and ``pg_ctl restart -m immediate`` on the embedded
server (on a server named by ``DATABASE_URL`` the test cannot restart it: that one step is
skipped, and the summary line says so).
"""

from __future__ import annotations

import http.client
import random
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections
from django.db.utils import DatabaseError

from outbox.emit import emit
from project.embedded import pg_ctl
from tenancy.contexts import OpContext
from tests import summary
from tests.chaos import tables
from tests.chaos.kinds import EFFECT, POISON
from tests.chaos.owner import query
from tests.chaos.rescue_times import held_by, rescue_times
from tests.helpers import fresh_async_connections
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue.api import NewItem, Workflow, enqueue, enqueue_many, enqueue_workflow

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("committed")]

WORKERS = 4
LEASE_S = 2.0
ENQUEUED = 4_800  # through enqueue_many, due across the window
EMITTED = 200  # through outbox.emit, during the faults
POISONED = 4  # due across the window; 2 more are claimed just before the restart
CHAINS, CHAIN_LENGTH = 30, 3  # workflows of effect steps, started across the window
GROUPS, GROUP_SIZE = 3, 100  # each with an on_success and an on_complete callback
STEP_S = 0.1  # each step's handler takes this long: every other kill aims at a step's holder
WINDOW_S = 20.0  # items fall due across this many seconds
KILLS_UNTIL_S = WINDOW_S + 4  # a random worker is SIGKILLed every 0.5-1 s until then
TERMINATE_AT_S, FREEZE_AT_S, RESTART_AT_S = 4.0, 8.0, 15.0
DRAIN_TIMEOUT_S = 120.0
SLOW_EVERY = 50  # every 50th item sleeps past the lease
POISON_EXIT = 70  # tests/chaos/kinds.py: the code a poison handler exits with

WORKER_ENV = {
    "WORKER_HANDLER_MODULES": "tests.chaos.kinds",
    "WORKER_LEASE_S": str(LEASE_S),
    "WORKER_POLL_INTERVAL_MS": "100",
    "WORKER_OUTAGE_BACKOFF_MAX_S": "0.5",
    "WORKER_HEARTBEAT_INTERVAL_S": "1",
    "WORKER_SHUTDOWN_GRACE_S": "5",
    "WORKER_METRICS_PORT": "0",
    "WORKER_METRICS_HOST": "127.0.0.1",
    # Sync handlers take a connection each: 16 leaves 5 handler slots per worker, so the fleet
    # (and its killed workers' lingering sessions) stays well inside max_connections = 100.
    "WORKER_DB_POOL_SIZE": "16",
    "SWEEP_INTERVAL_S": "0.5",
    "LOG_LEVEL": "INFO",
}


# -- the database, as the owner, through faults ------------------------------------------------


def reconnect_test_process() -> None:
    """The test's own sessions were cut too (this thread's, and those of sync_to_async's
    thread, where later tests' async calls run their queries): reopen them on next use."""
    for alias in ("default", "system", "admin"):
        connections[alias].close()
    fresh_async_connections()


# -- the fleet ---------------------------------------------------------------------------------


@dataclass
class Proc:
    n: int
    popen: subprocess.Popen[bytes]
    log: Path
    port: int | None = None
    scraped: int | None = None

    @property
    def app_name(self) -> str:
        return f"chaos-w{self.n}"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def metrics_port(self) -> int | None:
        if self.port is None:
            found = re.search(r"worker_started .* metrics_port=(\d+)", self.output())
            self.port = int(found.group(1)) if found else None
        return self.port

    def refused(self) -> int | None:
        """The worker's ``workqueue_stale_writes_refused_total`` (all transitions), or None
        when its endpoint does not answer; the last answer is kept in ``scraped``."""
        port = self.metrics_port()
        if port is None:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                page = r.read().decode()
        except (OSError, http.client.HTTPException):
            # Not answering, or gone mid-answer (a poison item it claimed ended its process).
            return None
        self.scraped = int(
            sum(
                float(line.rsplit(" ", 1)[1])
                for line in page.splitlines()
                if line.startswith("workqueue_stale_writes_refused_total{")
            )
        )
        return self.scraped

    def refusals_logged(self) -> int:
        """Stale writes this worker logged as refused (its counter died with it if killed)."""
        out = self.output()
        return sum(out.count(marker) for marker in _REFUSED_MARKERS)


# What a worker logs for a write its claim token no longer covered (workers/*.py).
_REFUSED_MARKERS = (
    "stale_complete_refused",
    "stale_fail_refused",
    "stale_release_refused",
    'reason="conflict"',
)
# What runworker says, in one line, when it starts while the database does not answer.
_START_REFUSED = ("cannot reach the database", "embedded PostgreSQL in")


@dataclass
class Fleet:
    logs: Path
    procs: dict[int, Proc] = field(default_factory=dict)
    protected: set[int] = field(default_factory=set)
    started: int = 0
    kills: int = 0
    poison_deaths: int = 0
    refused_starts: int = 0
    unexpected: list[str] = field(default_factory=list)
    finished: list[Proc] = field(default_factory=list)
    # For each kill: the database's clock just before it, and the (item, attempt) pairs the
    # killed worker held then (the rescue time of each is read from its attempt's end).
    held_at_kills: list[tuple[datetime, list[tuple[uuid.UUID, int]]]] = field(default_factory=list)

    def start(self) -> Proc:
        n = self.started
        self.started += 1
        log = self.logs / f"worker-{n}.log"
        env = subprocess_env(**WORKER_ENV, PGAPPNAME=f"chaos-w{n}")
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [PYTHON, "manage.py", "runworker", f"{EFFECT.name},{POISON.name}"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        proc = Proc(n, popen, log)
        self.procs[popen.pid] = proc
        return proc

    def reap(self) -> None:
        """Replace every worker that ended; a poison item's death is counted, any other exit
        that the test did not cause is kept to fail the run."""
        for pid, proc in list(self.procs.items()):
            code = proc.popen.poll()
            if code is None:
                continue
            del self.procs[pid]
            self.finished.append(proc)
            if code == POISON_EXIT:
                self.poison_deaths += 1
            elif code == 1 and any(m in proc.output() for m in _START_REFUSED):
                # Started while the server restarts: refused in one line, as a supervisor
                # would see it, and started again (as it would be).
                self.refused_starts += 1
            elif code != -signal.SIGKILL:
                self.unexpected.append(f"worker {proc.n} exited {code}:\n{proc.output()[-3000:]}")
            self.start()

    def kill_random(self, rng: random.Random) -> None:
        candidates = [pid for pid in self.procs if pid not in self.protected]
        if not candidates:
            return
        pid = rng.choice(candidates)
        if rng.random() < 0.5:
            # Mid-workflow: a worker that runs a step now, when one does.
            pid = rng.choice(list(self.holding(steps=True)) or [pid])
        if held := held_by(query, pid):
            self.held_at_kills.append(held)
        self.procs[pid].popen.send_signal(signal.SIGKILL)
        self.procs[pid].popen.wait()
        self.kills += 1
        self.reap()

    def holding(self, steps: bool = False) -> dict[int, int]:
        """Claimed items per live worker pid, unprotected (worker ids read host:pid:suffix); an
        item that sleeps past the lease counts for 100, so a worker holding one is frozen first
        (its handler wakes up stale and its compare-and-set is refused). ``steps``: workflows'
        steps only."""
        counts: Counter[int] = Counter()
        for claimed_by, slow in query(
            "SELECT claimed_by, coalesce((payload->>'sleep_s')::float8 > %s, false)"
            " FROM workqueue_workitem WHERE status = 'claimed'"
            " AND (workflow_id IS NOT NULL OR NOT %s)",
            [STEP_S, steps],
        ):
            parts = (claimed_by or "").split(":")
            if len(parts) >= 3 and parts[-2].isdigit():
                counts[int(parts[-2])] += 100 if slow else 1
        return {
            pid: n for pid, n in counts.items() if pid in self.procs and pid not in self.protected
        }

    def stop_all(self) -> dict[int, int | None]:
        """SIGTERM every worker (scraping its refusals first); returns pid -> refused."""
        refused = {pid: proc.refused() for pid, proc in self.procs.items()}
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGCONT)
                proc.popen.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
            self.finished.append(proc)
        self.procs.clear()
        return refused


# -- the faults: each a generator the main loop steps, so kills go on meanwhile ----------------

Step = Generator[None, None, None]


@dataclass
class Findings:
    terminated: int = 0
    frozen_refused: int = 0
    frozen_done: bool = False
    frozen_log: str = ""  # the frozen worker's last log lines when none of its writes was refused
    restarts: int = 0
    restart_note: str = ""
    # Items claimed just before the crash, and those whose attempts went back after it.
    claimed_at_crash: int = 0
    attempts_lost: list[str] = field(default_factory=list)
    slow_poison: list[uuid.UUID] = field(default_factory=list)


def terminate_all(findings: Findings) -> Step:
    """Cut every session of the test database but the one asking (``pg_terminate_backend``)."""
    rows = query(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    findings.terminated = rows[0][0]
    reconnect_test_process()
    yield


def freeze_one(fleet: Fleet, findings: Findings) -> Step:
    """SIGSTOP a worker that holds claims, past its lease, until the sweep has handed its items
    back; SIGCONT it; its first writes are stale and must be refused (its /metrics counts)."""
    while True:
        holding = fleet.holding()
        target = next((pid for pid, n in sorted(holding.items(), key=lambda x: -x[1]) if n), None)
        proc = fleet.procs.get(target) if target else None
        if proc is None or proc.metrics_port() is None:
            yield
            continue
        fleet.protected.add(target)
        proc.popen.send_signal(signal.SIGSTOP)
        # Frozen holding the sweep's lock, it would stop every sweeper: try another moment.
        # (The sweep's mutex: its holder sits in the transaction that locked the row, idle, or
        # still active when the stop caught the locking statement on its way.)
        if query(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND state <> 'idle' AND query LIKE %s",
            [proc.app_name, "%FROM workqueue_mutex%"],
        )[0][0]:
            proc.popen.send_signal(signal.SIGCONT)
            fleet.protected.discard(target)
            yield
            continue
        break
    held = [
        row[0]
        for row in query(
            "SELECT id FROM workqueue_workitem WHERE status = 'claimed' AND claimed_by LIKE %s",
            [f"%:{target}:%"],
        )
    ]
    frozen_at = time.monotonic()
    # Past its lease, and until another worker's sweep has handed every one of its items back.
    while (
        time.monotonic() - frozen_at < LEASE_S + 0.5
        or query(
            "SELECT count(*) FROM workqueue_workitem WHERE id = ANY(%s) AND status = 'claimed'"
            " AND claimed_by LIKE %s",
            [held, f"%:{target}:%"],
        )[0][0]
    ):
        if time.monotonic() - frozen_at > 30:
            break  # the check on refusals below fails the run, with this worker's log
        yield
    proc.popen.send_signal(signal.SIGCONT)
    resumed_at = time.monotonic()
    while time.monotonic() - resumed_at < 20:
        refused = proc.refused()
        if refused is None and proc.popen.poll() is not None:
            # It ended (a poison item it claimed on waking ends its process): its counter died
            # with it, and its log says what was refused, as for every worker that ended.
            refused = proc.refusals_logged()
        if refused:
            findings.frozen_refused = refused
            break
        yield
    if not findings.frozen_refused:
        findings.frozen_log = proc.output()[-4000:]
    fleet.protected.discard(target)
    findings.frozen_done = True


def restart_database(fleet: Fleet, findings: Findings, ctx: OpContext) -> Step:
    """Two slow poison items are claimed (their handlers logged the attempt and sleep); every
    claimed item's attempts are read; PostgreSQL restarts in immediate mode (no clean
    shutdown); no attempt read before the crash may be gone after it."""
    pgdata = settings.EMBEDDED_PGDATA
    if pgdata is None:
        findings.restart_note = (
            " (restart skipped: DATABASE_URL names a server this test cannot restart)"
        )
        print("chaos: DATABASE_URL is set; the database restart step is skipped")
        return
    # One fault at a time: a restart during the freeze would cut the frozen worker's sessions,
    # and its stale writes would fail on a dead connection instead of meeting the fence.
    while not findings.frozen_done:
        yield
    ids = [enqueue(ctx, POISON.name, {"n": -1 - i, "sleep_s": 2 * LEASE_S})[0].id for i in range(2)]
    findings.slow_poison = ids
    started = time.monotonic()
    while time.monotonic() - started < 20:
        entered = query(
            "SELECT count(*) FROM workqueue_workitem w WHERE w.id = ANY(%s)"
            " AND w.status = 'claimed' AND EXISTS (SELECT 1 FROM chaos_run r"
            " WHERE r.item_id = w.id AND r.attempt = w.attempts)",
            [ids],
        )[0][0]
        if entered == len(ids):
            break
        yield
    before = dict(query("SELECT id, attempts FROM workqueue_workitem WHERE status = 'claimed'"))
    code = pg_ctl(
        Path(pgdata), "restart", "-m", "immediate", "-w", "-t", "60", "-l", f"{pgdata}/log"
    )
    assert code == 0, "pg_ctl restart -m immediate failed"
    reconnect_test_process()
    findings.restarts += 1
    findings.claimed_at_crash = len(before)
    after = dict(
        query("SELECT id, attempts FROM workqueue_workitem WHERE id = ANY(%s)", [list(before)])
    )
    findings.attempts_lost = [
        f"{item_id}: {attempts} before, {after.get(item_id)} after"
        for item_id, attempts in before.items()
        if after.get(item_id, -1) < attempts
    ]
    yield


# -- the run -----------------------------------------------------------------------------------


@pytest.fixture
def chaos_tables() -> Generator[None, None, None]:
    tables.create()
    try:
        yield
    finally:
        reconnect_test_process()
        tables.drop()


def _fill(ctxs: list[OpContext], due: datetime) -> list[uuid.UUID]:
    """``ENQUEUED`` effect items and ``POISONED`` poison items, due evenly across the window,
    spread over the tenants; every ``SLOW_EVERY``-th effect item sleeps past the lease."""
    ids = []
    for start in range(0, ENQUEUED, 1000):
        for ctx in ctxs:
            batch = [
                NewItem(
                    EFFECT.name,
                    {"n": i, "sleep_s": LEASE_S + 0.5 if i % SLOW_EVERY == 0 else 0.0},
                    available_at=due + timedelta(seconds=WINDOW_S * i / ENQUEUED),
                )
                for i in range(start, min(ENQUEUED, start + 1000))
                if i % len(ctxs) == ctxs.index(ctx)
            ]
            ids += [item_id for item_id, _ in enqueue_many(ctx, batch)]
    for i in range(POISONED):
        at = due + timedelta(seconds=WINDOW_S * (i + 0.5) / POISONED)
        ids.append(enqueue(ctxs[i % len(ctxs)], POISON.name, {"n": i}, available_at=at)[0].id)
    return ids


def _fill_workflows(ctxs: list[OpContext], due: datetime) -> int:
    """``CHAINS`` chains and ``GROUPS`` groups (with both callbacks) of effect steps, their
    first steps due across the window, so kills land between a step and the next; numbered
    after every other effect item. Returns how many steps they hold."""
    n = ENQUEUED + EMITTED
    steps = 0
    for c in range(CHAINS + GROUPS):
        at = due + timedelta(seconds=WINDOW_S * (c + 0.5) / (CHAINS + GROUPS))
        wf = Workflow()
        if c < CHAINS:
            wf.chain(
                *(
                    NewItem(
                        EFFECT.name,
                        {"n": n + i, "sleep_s": STEP_S},
                        available_at=at if i == 0 else None,
                    )
                    for i in range(CHAIN_LENGTH)
                )
            )
        else:
            wf.group(
                [
                    NewItem(EFFECT.name, {"n": n + i, "sleep_s": STEP_S}, available_at=at)
                    for i in range(GROUP_SIZE)
                ],
                on_success=NewItem(EFFECT.name, {"n": n + GROUP_SIZE}),
                on_complete=NewItem(EFFECT.name, {"n": n + GROUP_SIZE + 1}),
            )
        steps += len(wf.steps)
        n += len(wf.steps)
        enqueue_workflow(ctxs[c % len(ctxs)], wf)
    return steps


def _emit_retrying(ctx: OpContext, n: int) -> None:
    """One work row through the outbox, in the test's own session (cut by the faults too)."""
    for _ in range(50):
        try:
            emit(ctx, f"work.{EFFECT.name}", {"n": ENQUEUED + n})
            return
        except DatabaseError:
            reconnect_test_process()
            time.sleep(0.1)
    raise AssertionError("the outbox could not be written for 5 s")


def test_five_thousand_items_through_kills_cuts_a_freeze_and_a_database_crash(
    chaos_tables: None, make_ctx: Callable[..., OpContext], tmp_path: Path
) -> None:
    rng = random.Random()
    ctxs = [make_ctx() for _ in range(3)]
    due = datetime.now(UTC) + timedelta(seconds=3)  # after the fleet is up
    _fill(ctxs, due)
    steps = _fill_workflows(ctxs, due)
    fleet = Fleet(tmp_path)
    findings = Findings()
    for _ in range(WORKERS):
        fleet.start()
    t0 = time.monotonic() + max(0.0, (due - datetime.now(UTC)).total_seconds())
    schedule: list[tuple[float, Callable[[], Step]]] = [
        (TERMINATE_AT_S, lambda: terminate_all(findings)),
        (FREEZE_AT_S, lambda: freeze_one(fleet, findings)),
        (RESTART_AT_S, lambda: restart_database(fleet, findings, ctxs[0])),
    ]
    running: list[Step] = []
    emitted = 0
    next_kill = t0 + rng.uniform(0.5, 1.0)
    try:
        while True:
            now = time.monotonic()
            elapsed = now - t0
            fleet.reap()
            if elapsed >= 0 and now < t0 + KILLS_UNTIL_S and now >= next_kill:
                fleet.kill_random(rng)
                next_kill = now + rng.uniform(0.5, 1.0)
            while schedule and elapsed >= schedule[0][0]:
                running.append(schedule.pop(0)[1]())
            for step in list(running):
                try:
                    next(step)
                except StopIteration:
                    running.remove(step)
            if emitted < EMITTED and elapsed >= WINDOW_S * emitted / EMITTED:
                _emit_retrying(ctxs[emitted % len(ctxs)], emitted)
                emitted += 1
            if not schedule and not running and emitted == EMITTED and now > t0 + KILLS_UNTIL_S:
                left = query(
                    "SELECT (SELECT count(*) FROM workqueue_workitem"
                    "        WHERE status IN ('pending', 'claimed', 'waiting'))"
                    "     + (SELECT count(*) FROM workqueue_outbox_outboxrow"
                    "         WHERE status = 'pending')"
                )[0][0]
                if left == 0:
                    break
                assert now < t0 + KILLS_UNTIL_S + DRAIN_TIMEOUT_S, f"{left} items never finished"
            time.sleep(0.05)
    finally:
        for step in running:
            step.close()
        survivors = fleet.stop_all()
    took_s = time.monotonic() - t0
    _check(fleet, findings, survivors, took_s, steps)


def _check(
    fleet: Fleet,
    findings: Findings,
    survivors: dict[int, int | None],
    took_s: float,
    steps: int,
) -> None:
    assert not fleet.unexpected, "a worker died that the test did not kill:\n" + "\n".join(
        fleet.unexpected
    )
    statuses = dict(
        query("SELECT kind || ':' || status, count(*) FROM workqueue_workitem GROUP BY 1")
    )
    effect_items = statuses.get(f"{EFFECT.name}:done", 0)
    # Lost: an effect item not done, or done without its effect. Doubled: applied twice.
    (not_done, without_effect, doubled, refused_cas, redelivered) = query(
        """
        SELECT (SELECT count(*) FROM workqueue_workitem
                 WHERE kind = %(effect)s AND status <> 'done'),
               (SELECT count(*) FROM workqueue_workitem w
                 WHERE w.kind = %(effect)s AND NOT EXISTS (
                       SELECT 1 FROM chaos_effect e WHERE e.item_id = w.id AND e.version = 1)),
               (SELECT count(*) FROM (SELECT item_id FROM chaos_run WHERE outcome = 'applied'
                                       GROUP BY item_id HAVING count(*) > 1) d)
             + (SELECT count(*) FROM chaos_effect WHERE version > 1),
               (SELECT count(*) FROM chaos_run WHERE outcome = 'refused'),
               (SELECT count(DISTINCT item_id) FROM chaos_run WHERE outcome = 'already')
        """,
        {"effect": EFFECT.name},
    )[0]
    # An attempt number that two runs of one item saw: a claim the database forgot.
    reused = query(
        "SELECT item_id, attempt FROM chaos_run GROUP BY item_id, attempt"
        " HAVING count(DISTINCT claim_token) > 1"
    )
    poison = query(
        """
        SELECT w.id, w.status, w.attempts, w.max_attempts,
               (SELECT count(*) FROM workqueue_audit_auditentry a WHERE a.subject_id = w.id::text
                   AND a.action = 'work.dead_lettered'),
               (SELECT count(*) FROM chaos_run r WHERE r.item_id = w.id)
          FROM workqueue_workitem w WHERE w.kind = %s
        """,
        [POISON.name],
    )
    claimed = query(
        "SELECT count(*) FROM workqueue_workitem WHERE status IN ('claimed', 'waiting')"
    )[0][0]
    # The workflows: their steps all done, and no step run before every step it waits for was
    # done (its first run began after its parent's completing statement).
    (steps_done, edges, early) = query(
        """
        SELECT (SELECT count(*) FROM workqueue_workitem
                 WHERE workflow_id IS NOT NULL AND status = 'done'),
               (SELECT count(*) FROM workqueue_dependency),
               (SELECT count(*) FROM workqueue_dependency d
                 WHERE coalesce((SELECT min(r.at) FROM chaos_run r WHERE r.item_id = d.child_id)
                                  <= (SELECT max(a.ended_at) FROM workqueue_attempt a
                                       WHERE a.item_id = d.parent_id AND a.outcome = 'done'),
                                true))
        """
    )[0]
    held = list({item_id for _, pairs in fleet.held_at_kills for item_id, _ in pairs})
    steps_killed = query(
        "SELECT count(*) FROM workqueue_workitem WHERE id = ANY(%s) AND workflow_id IS NOT NULL",
        [held],
    )[0][0]
    outbox = dict(query("SELECT status, count(*) FROM workqueue_outbox_outboxrow GROUP BY 1"))
    outbox_items = query(
        "SELECT count(*) FROM workqueue_outbox_outboxrow o JOIN workqueue_workitem w ON w.id = o.id"
        " WHERE w.status = 'done'"
    )[0][0]
    # A worker's counter where it was read (survivors, the frozen one), else its log lines.
    queue_refused = sum(max(p.scraped or 0, p.refusals_logged()) for p in fleet.finished)
    dead = sum(1 for p in poison if p[1] == "failed")
    lost = not_done + without_effect + len(findings.attempts_lost) + len(reused)
    rescue = rescue_times(query, fleet.held_at_kills)
    summary.state(
        "chaos",
        f"chaos: {effect_items + len(poison)} items ({effect_items} done, {len(poison)} poison),"
        f" {fleet.kills} kills (+{fleet.poison_deaths} poison deaths, {fleet.started} workers"
        f" started, {fleet.refused_starts} refused to start while the server restarted),"
        f" {findings.terminated} connections cut, 1 freeze,"
        f" {findings.restarts} restarts{findings.restart_note}"
        f" ({findings.claimed_at_crash} claims held across it), refused stale writes"
        f" {queue_refused + refused_cas} (queue fence {queue_refused}, record CAS {refused_cas};"
        f" the frozen worker's /metrics {findings.frozen_refused}), poison dead-lettered"
        f" {dead}/{len(poison)}, redelivered after effect {redelivered}, lost {lost},"
        f" doubled {doubled}, {rescue}, workflows {CHAINS} chains and {GROUPS} groups"
        f" ({steps_done}/{steps} steps done, {steps_killed} held by a killed worker, {edges} edges,"
        f" {early} run early), {took_s:.0f} s",
    )
    assert effect_items >= ENQUEUED + EMITTED + steps and not_done == 0, statuses
    assert steps_done == steps and early == 0
    assert edges == CHAINS * (CHAIN_LENGTH - 1) + GROUPS * 2 * GROUP_SIZE
    assert without_effect == 0 and doubled == 0
    assert claimed == 0
    assert outbox == {"relayed": EMITTED} and outbox_items == EMITTED, outbox
    assert findings.attempts_lost == [], "attempts lost across the restart"
    assert reused == [], "an attempt number handed out twice (a claim forgotten)"
    assert findings.frozen_refused > 0, (
        "the frozen worker's stale writes were not refused; its log ends:\n" + findings.frozen_log
    )
    assert len(poison) == POISONED + len(findings.slow_poison)
    for item_id, status, attempts, max_attempts, audits, runs in poison:
        assert (status, attempts, audits) == ("failed", max_attempts, 1), item_id
        assert runs <= max_attempts, f"{item_id} ran {runs} times"
    assert fleet.kills >= 10 and findings.terminated > 0
    assert survivors, "no worker was left to stop"
