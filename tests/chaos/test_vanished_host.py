"""A host that vanishes without refusing anything: its packets dropped, no reset, no error.

A cluster of the test's own (``tests/replication.py``) listens on this machine's end of a veth
pair; one ``runworker`` runs inside a network namespace (``tests/netns.py``) and reaches it
over the pair, another (when there is one) runs here. A cut drops every packet one end sends
(``tc qdisc ... blackhole``). The workers run with short keepalives and user timeout
(``DB_KEEPALIVES_*``, ``DB_TCP_USER_TIMEOUT_MS``: ``TCP_BOUND_S``), so the test reads how long
the worker's own connections outlive the cut from the namespace's sockets (``ss``).

- The worker's host cut off (both ends dropped) with its items mid-handler: it fences itself
  (``liveness_lost``), the server ends its liveness session within the keepalive bounds that
  session set for the server's end, so the other worker's sweep hands the items back then (the
  rescue, long before their lease) and runs them, and when the network returns the cut-off
  handlers' writes are refused by the record's compare-and-set; the cut-off worker then claims
  and completes again.
- The database host dropping what it sends the workers (one end): the worker's connections end
  within the TCP bound, and it completes what was enqueued meanwhile once the packets flow.

Both assert what must hold (lost 0, doubled 0, the bounds), never how often a line was said,
and print one summary line. Skipped in one line when not root or without namespaces here.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from tests import netns, replication, summary
from tests.chaos import tables
from tests.chaos.cut_kinds import CUT, GATE_ENV
from tests.chaos.failover import Run, query, read_journal, tenant
from tests.chaos.failover_kinds import JOURNAL_ENV
from tests.replication import DATABASE
from tests.runtime.support import PYTHON, ROOT, crash_tracebacks, subprocess_env, wait_until
from workqueue.api import NewItem, enqueue_many

pytestmark = pytest.mark.slow

SUITE = "vanished"
LEASE_S = 4.0
HELD = 4  # items the cut-off worker holds at the cut
AFTER = 3  # items enqueued later, for the worker to complete once it is back
KEEPALIVE = {"DB_KEEPALIVES_IDLE_S": 2, "DB_KEEPALIVES_INTERVAL_S": 1, "DB_KEEPALIVES_COUNT": 2}
USER_TIMEOUT_MS = 3000
# How long a connection of the worker's outlives a cut, as configured: an idle one the
# keepalives end, a busy one the user timeout. The kernel checks the user timeout when it
# retransmits, at gaps that double, so a busy one may live up to about twice this.
TCP_BOUND_S = max(
    KEEPALIVE["DB_KEEPALIVES_IDLE_S"]
    + KEEPALIVE["DB_KEEPALIVES_INTERVAL_S"] * KEEPALIVE["DB_KEEPALIVES_COUNT"],
    USER_TIMEOUT_MS / 1000,
)
# The cut-off worker's lease: long, so that its items go back by the rescue or not in time.
LONG_LEASE_S = 60.0
# What a machine shared with other work adds to any bound here.
SLACK_S = 10.0
WORKER_ENV = {
    "WORKER_HANDLER_MODULES": "tests.chaos.cut_kinds",
    "WORKER_LEASE_S": str(LEASE_S),
    "WORKER_OUTAGE_BACKOFF_MAX_S": "1",
    "SWEEP_INTERVAL_S": "1",
    "WORKER_SHUTDOWN_GRACE_S": "2",
    "WORKER_METRICS_PORT": "0",
    "WORKER_METRICS_HOST": "127.0.0.1",
    "LOG_LEVEL": "INFO",
    **{name: str(value) for name, value in KEEPALIVE.items()},
    "DB_TCP_USER_TIMEOUT_MS": str(USER_TIMEOUT_MS),
}
PARTS: dict[str, str] = {}


def _state(key: str, part: str) -> None:
    PARTS[key] = part
    ordered = [PARTS[k] for k in ("worker", "database") if k in PARTS]
    summary.state(SUITE, "vanished host: " + "; ".join(ordered))


@dataclass
class Site:
    server: replication.Server
    ns: netns.Namespace
    folder: Path

    def url(self, user: str) -> str:
        # No keepalive options in the URL: the workers take them from their settings.
        return (
            f"postgres://{user}@{self.ns.host_addr}:{self.server.port}/{DATABASE}?connect_timeout=3"
        )


@pytest.fixture(scope="module", autouse=True)
def _namespaces() -> None:
    """Skip in one line, before any cluster is made, where no namespace can be."""
    reason = netns.why_not()
    if reason is not None:
        summary.state(SUITE, f"vanished host: skipped ({reason})")
        pytest.skip(reason)


@pytest.fixture
def site(
    template: replication.Server,
    aim: Callable[[Callable[[str], str]], None],
    tmp_path: Path,
) -> Iterator[Site]:
    """A namespace and a cluster reachable from it; both gone after, whatever happened."""
    ns = netns.Namespace.make()
    server = None
    try:
        server = replication.single(template, listen=ns.host_addr, trust=ns.network)
        made = Site(server, ns, tmp_path)
        aim(made.url)
        tables.create()
        yield made
    finally:
        ns.close()
        if server is not None:
            server.remove()


class Worker:
    def __init__(self, site: Site, name: str, inside: bool, **env: str) -> None:
        self.log = site.folder / f"{name}.log"
        line = [PYTHON, "manage.py", "runworker", CUT.name]
        environment = subprocess_env(
            **{**WORKER_ENV, **env},
            **{variable: site.url(user) for variable, user in (
                ("DATABASE_URL", "workqueue_app"),
                ("SYSTEM_DATABASE_URL", "workqueue_system"),
                ("ADMIN_DATABASE_URL", replication.SUPERUSER),
            )},
            **{JOURNAL_ENV: str(site.folder / "journal.txt"), GATE_ENV: str(site.folder / "gate")},
        )  # fmt: skip
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                site.ns.command(*line) if inside else line,
                cwd=ROOT,
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def first(self, events: tuple[str, ...], after: float) -> float | None:
        """When the worker first said one of ``events`` after ``after`` (Unix time)."""
        for line in self.output().splitlines():
            found = re.match(r"ts=(\S+) ", line)
            if found is None or not any(f" {event} " in f"{line} " for event in events):
                continue
            at = datetime.fromisoformat(found.group(1).replace("Z", "+00:00")).timestamp()
            if at >= after:
                return at
        return None

    def stop(self) -> int | None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        return self.popen.returncode


def _enqueue(n: int, start: int) -> None:
    enqueue_many(tenant(), [NewItem(CUT.name, {"n": start + i}) for i in range(n)])


def _count(sql: str) -> int:
    return int(query(sql)[0][0])


def _pending_or_claimed() -> int:
    return _count("SELECT count(*) FROM workqueue_workitem WHERE status IN ('pending','claimed')")


def _lost_and_doubled(runs: dict[str, list[Run]]) -> tuple[int, int]:
    not_done = _count("SELECT count(*) FROM workqueue_workitem WHERE status <> 'done'")
    without = _count(
        "SELECT count(*) FROM workqueue_workitem w WHERE NOT EXISTS ("
        " SELECT 1 FROM chaos_effect e WHERE e.item_id = w.id AND e.version = 1)"
    )
    doubled = sum(sum(r.outcome == "applied" for r in item) > 1 for item in runs.values())
    return not_done + without, doubled


def _gone_after(site: Site, before: set[str], since: float) -> float:
    """Seconds from ``since`` until none of the connections ``before`` is established inside."""
    wait_until(lambda: not before & site.ns.established(site.server.port), SLACK_S * 3)
    return time.time() - since


def _no_crash(*workers: Worker) -> None:
    for worker in workers:
        assert crash_tracebacks(worker.output()) == [], worker.output()[-4000:]


def test_a_worker_host_cut_off_is_fenced_rescued_and_writes_nothing_stale(site: Site) -> None:
    """The cut-off worker's items are claimed under a long lease: the server ends its liveness
    session within the keepalive bounds the session gave it (``server_socket_settings``), the
    lock is free, and the rescue hands the items back long before the lease would."""
    # No sweep inside: which of its passes a cut lands in is chance; the rescue needs none.
    cut_off = Worker(
        site, "cut-off", inside=True, WORKER_SWEEP="false", WORKER_LEASE_S=str(LONG_LEASE_S)
    )
    outside: Worker | None = None
    try:
        _enqueue(HELD, 0)
        # Every item claimed by the worker inside, and its record read, before the other starts.
        wait_until(lambda: _count("SELECT count(*) FROM chaos_effect") == HELD, 90)
        outside = Worker(site, "outside", inside=False)
        wait_until(lambda: outside.first(("worker_started",), 0) is not None, 60)
        before = site.ns.established(site.server.port)
        assert before, "the worker inside holds no connection over the pair"
        cut_at = time.time()
        site.ns.cut(netns.HOST_TO_NS, netns.NS_TO_HOST)
        tcp_s = _gone_after(site, before, cut_at)
        # Another worker runs them once the server let the lock go, the cut-off one still
        # mid-handler.
        wait_until(lambda: _pending_or_claimed() == 0, LONG_LEASE_S + SLACK_S * 3)
        runs = read_journal(site.folder / "journal.txt")
        rescued = [r.started for item in runs.values() for r in item if r.attempt == 2]
        assert len(rescued) == HELD, runs
        rescue_s = max(rescued) - cut_at
        told = [r.told for item in runs.values() for r in item if r.attempt == 1 and r.told]
        fenced_s = max(told) - cut_at if len(told) == HELD else None
        assert outside.stop() == 0, outside.output()[-4000:]
        # The network back: the cut-off handlers write, and are refused by the record's fence.
        site.ns.mend(netns.HOST_TO_NS, netns.NS_TO_HOST)
        mended_at = time.time()
        (site.folder / "gate").touch()

        def cut_runs_ended() -> list[Run]:
            journal = read_journal(site.folder / "journal.txt")
            return [r for item in journal.values() for r in item if r.attempt == 1 and r.ended]

        wait_until(lambda: len(cut_runs_ended()) == HELD, SLACK_S * 3)
        stale = cut_runs_ended()
        # And it works again: what is enqueued now, it alone runs.
        _enqueue(AFTER, HELD)
        wait_until(lambda: _pending_or_claimed() == 0, SLACK_S * 4)
        resume_s = time.time() - mended_at
    finally:
        codes = [w.stop() for w in (cut_off, outside) if w is not None]
    # Read from its whole output once it stopped: on a busy machine the line may be written
    # after the rescue.
    said_at = cut_off.first(("liveness_lost",), cut_at)
    runs = read_journal(site.folder / "journal.txt")
    lost, doubled = _lost_and_doubled(runs)
    refused = sum(r.outcome in ("refused", "already") for r in stale)
    outcomes = {
        outcome
        for (outcome,) in query(
            "SELECT a.outcome FROM workqueue_attempt a WHERE a.attempt = 1 AND EXISTS"
            " (SELECT FROM workqueue_attempt b WHERE b.item_id = a.item_id AND b.attempt = 2)"
        )
    }
    how = "its lock freed by the server" if outcomes == {"holder_gone"} else str(outcomes)
    fenced = f"{fenced_s:.1f} s" if fenced_s is not None else "never"
    said = f"{said_at - cut_at:.1f} s" if said_at else "never"
    _state(
        "worker",
        f"worker host cut off with {HELD} items mid-handler: its handlers told to stop {fenced}"
        f" after the cut (liveness_lost said {said} after), its connections ended {tcp_s:.1f} s"
        f" after (configured {TCP_BOUND_S:g} s), items rescued within {rescue_s:.1f} s ({how},"
        f" lease {LONG_LEASE_S:g} s), stale writes refused {refused} of {len(stale)}, back"
        f" {resume_s:.1f} s after the network, lost {lost}, doubled {doubled}",
    )
    _no_crash(cut_off, *([outside] if outside else []))
    assert codes[0] == 0, cut_off.output()[-4000:]
    assert said_at is not None, cut_off.output()[-4000:]
    # Fenced before the lease ran out (the worker's clock against the database's: a bound).
    assert fenced_s is not None and fenced_s <= LEASE_S + SLACK_S, runs
    assert tcp_s <= 2 * TCP_BOUND_S + SLACK_S
    # Handed back by the rescue (the server ended the session), not by the lease.
    assert outcomes == {"holder_gone"}, outcomes
    assert rescue_s <= 2 * TCP_BOUND_S + 1 + SLACK_S
    assert (lost, doubled) == (0, 0)
    assert refused == HELD, stale
    # Each rescued item's record carries the rescuing run's write, the cut-off run's refused.
    assert _count("SELECT count(*) FROM chaos_effect WHERE applied_attempt = 2") == HELD


def test_a_database_host_dropping_its_packets_is_noticed_within_the_bound(site: Site) -> None:
    worker = Worker(site, "worker", inside=True)
    try:
        (site.folder / "gate").touch()  # nothing waits here
        _enqueue(AFTER, 0)
        wait_until(lambda: _pending_or_claimed() == 0, 90)
        before = site.ns.established(site.server.port)
        assert before, "the worker holds no connection over the pair"
        cut_at = time.time()
        site.ns.cut(netns.HOST_TO_NS)  # what the database sends the worker is dropped
        tcp_s = _gone_after(site, before, cut_at)
        _enqueue(AFTER, AFTER)  # while it cannot hear the database
        time.sleep(max(0.0, TCP_BOUND_S - (time.time() - cut_at)))
        site.ns.mend(netns.HOST_TO_NS)
        mended_at = time.time()
        wait_until(lambda: _pending_or_claimed() == 0, SLACK_S * 4)
        resume_s = time.time() - mended_at
    finally:
        code = worker.stop()
    said_at = worker.first(("database_unreachable", "liveness_lost"), cut_at)
    lost, doubled = _lost_and_doubled(read_journal(site.folder / "journal.txt"))
    said = f"{said_at - cut_at:.1f} s" if said_at else "never"
    _state(
        "database",
        f"database host dropping its packets: the worker said so {said} after, its connections"
        f" ended {tcp_s:.1f} s after (configured {TCP_BOUND_S:g} s), done again {resume_s:.1f} s"
        f" after the packets flowed, lost {lost}, doubled {doubled}",
    )
    _no_crash(worker)
    assert code == 0, worker.output()[-4000:]
    assert said_at is not None, worker.output()[-4000:]
    assert tcp_s <= 2 * TCP_BOUND_S + SLACK_S
    assert resume_s <= SLACK_S * 2
    assert (lost, doubled) == (0, 0)
