"""The database's disk full, and a settle that meets a lock past its ``lock_timeout``.

A cluster of the test's own (``tests/replication.py``) keeps the queue's tables (items,
attempts, the handlers' records, with their indexes) in a tablespace on a small tmpfs mounted by
the test (as root: ``mount -t tmpfs -o size=``). A real ``runworker`` runs ``CUT_EFFECT``
(``tests/chaos/cut_kinds.py``: a compare-and-set on a record per item, each run journalled
outside the database, a first run waiting for the test's gate between its read and its write).
With items mid-handler the test fills the filesystem, then opens the gate: enqueues are
refused with the server's own error (``could not extend file ...: No space left on device``)
and store nothing, the worker's settles fail with it in its log and are kept; once space is
freed the worker settles them and runs the rest. Then a lock held on an item's row while the
worker settles it, with ``lock_timeout`` set for the logins: the settle fails with the server's
``canceling statement due to lock timeout``, nothing is written, and it lands once the lock is
let go.

What must hold is asserted (lost 0, doubled 0, each done item settled by one attempt, a
refused enqueue left nothing), never how often a line was said. Skipped in one line when not
root.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError

from tests import replication, summary
from tests.chaos import tables
from tests.chaos.cut_kinds import CUT, GATE_ENV
from tests.chaos.failover import query, read_journal, tenant
from tests.chaos.failover_kinds import JOURNAL_ENV
from tests.replication import DATABASE
from tests.runtime.support import PYTHON, ROOT, crash_tracebacks, subprocess_env, wait_until
from workqueue.api import NewItem, enqueue_many

pytestmark = pytest.mark.slow

SUITE = "disk"
DISK = "24m"
TABLES = ("workqueue_workitem", "workqueue_attempt", "chaos_effect")
WARM = 5  # items run before the disk fills
MID = 4  # items mid-handler when it fills
NO_SPACE = "No space left on device"
LOCK_TIMEOUT = "canceling statement due to lock timeout"
WORKER_ENV = {
    "WORKER_HANDLER_MODULES": "tests.chaos.cut_kinds",
    "WORKER_OUTAGE_BACKOFF_MAX_S": "1",
    "SWEEP_INTERVAL_S": "1",
    "WORKER_SHUTDOWN_GRACE_S": "5",
    "WORKER_METRICS_PORT": "0",
    "WORKER_METRICS_HOST": "127.0.0.1",
    "LOG_LEVEL": "INFO",
}
PARTS: dict[str, str] = {}


def _state(key: str, part: str) -> None:
    PARTS[key] = part
    ordered = [PARTS[k] for k in ("disk", "lock") if k in PARTS]
    summary.state(SUITE, "disk full: " + "; ".join(ordered))


@pytest.fixture(scope="module", autouse=True)
def _root() -> None:
    """Skip in one line, before any cluster is made, where no filesystem can be mounted."""
    if os.geteuid() != 0:
        reason = "not root: a size-limited tmpfs needs mount (run as root)"
        summary.state(SUITE, f"disk full: skipped ({reason})")
        pytest.skip(reason)


@pytest.fixture
def cluster(
    template: replication.Server, aim: Callable[[Callable[[str], str]], None]
) -> Iterator[replication.Server]:
    server = replication.single(template)
    try:
        aim(lambda user: f"postgres://{user}@127.0.0.1:{server.port}/{DATABASE}?connect_timeout=3")
        tables.create()
        yield server
    finally:
        server.remove()


def _owner(server: replication.Server) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(server.conninfo(dbname=DATABASE), autocommit=True, connect_timeout=5)


@pytest.fixture
def small_disk(cluster: replication.Server) -> Iterator[replication.Server]:
    """The queue's tables and their indexes moved to a tablespace on a ``DISK`` tmpfs (in a
    folder the servers' user can reach: pytest's own are root's alone)."""
    place = Path(tempfile.mkdtemp(prefix="small-disk-"))
    os.chmod(place, 0o755)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK},mode=0700", "tmpfs", str(place)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    try:
        replication.own(place)
        with _owner(cluster) as conn:
            conn.execute(f"CREATE TABLESPACE small LOCATION '{place}'")
            for table in TABLES:
                conn.execute(f"ALTER TABLE {table} SET TABLESPACE small")
                indexes = conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE tablename = %s", [table]
                ).fetchall()
                for (index,) in indexes:
                    conn.execute(f"ALTER INDEX {index} SET TABLESPACE small")
        yield cluster
    finally:
        cluster.stop()  # its files on the tmpfs closed first
        subprocess.run(["umount", "-l", str(place)], capture_output=True, timeout=30)
        place.rmdir()


def _fill(server: replication.Server) -> None:
    """Fill the tablespace's filesystem, then the last pages of the queue's tables, until the
    server refuses to extend them."""
    with _owner(server) as conn:
        conn.execute("CREATE TABLE disk_filler (n int, pad text) TABLESPACE small")
        for _ in range(10_000):
            try:
                conn.execute(
                    "INSERT INTO disk_filler SELECT g.n, (SELECT string_agg(md5(random()::text"
                    " || g.n || p.i), '') FROM generate_series(1, 28) AS p(i))"
                    " FROM generate_series(1, 500) AS g(n)"
                )
            except psycopg.errors.DiskFull:
                break
        # An attempt for no item, until the attempts' last page is full too.
        for _ in range(10_000):
            try:
                conn.execute(
                    "INSERT INTO workqueue_attempt (org_id, item_id, attempt, worker, host,"
                    " outcome, error, traceback) VALUES (%s, %s, 1, '', '', 'done', '', '')",
                    [uuid.uuid4(), uuid.uuid4()],
                )
            except psycopg.errors.DiskFull:
                break


def _free(server: replication.Server) -> None:
    with _owner(server) as conn:
        conn.execute("DROP TABLE disk_filler")
        conn.execute(
            "DELETE FROM workqueue_attempt a WHERE NOT EXISTS"
            " (SELECT FROM workqueue_workitem w WHERE w.id = a.item_id)"
        )


class Worker:
    def __init__(self, folder: Path) -> None:
        self.log = folder / "worker.log"
        self.gate = folder / "gate"
        env = subprocess_env(
            **WORKER_ENV, **{JOURNAL_ENV: str(folder / "journal.txt"), GATE_ENV: str(self.gate)}
        )
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                [PYTHON, "manage.py", "runworker", CUT.name],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> int | None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        return self.popen.returncode


def _count(sql: str, params: Any = None) -> int:
    return int(query(sql, params)[0][0])


def _unsettled() -> int:
    return _count("SELECT count(*) FROM workqueue_workitem WHERE status IN ('pending','claimed')")


def _check_settled(folder: Path) -> tuple[int, int]:
    """Lost and doubled; and each done item settled by one attempt (nothing half-written)."""
    lost = _count("SELECT count(*) FROM workqueue_workitem WHERE status <> 'done'") + _count(
        "SELECT count(*) FROM workqueue_workitem w WHERE NOT EXISTS ("
        " SELECT 1 FROM chaos_effect e WHERE e.item_id = w.id AND e.version = 1)"
    )
    runs = read_journal(folder / "journal.txt")
    doubled = sum(sum(r.outcome == "applied" for r in item) > 1 for item in runs.values())
    settled_twice = _count(
        "SELECT count(*) FROM workqueue_workitem w WHERE (SELECT count(*) FROM"
        " workqueue_attempt a WHERE a.item_id = w.id AND a.outcome = 'done') <> 1"
    )
    assert settled_twice == 0
    return lost, doubled


def _enqueue(n: int, start: int, key: str = "") -> None:
    items = [
        NewItem(
            CUT.name,
            {"n": start + i},
            idempotency_key=f"{key}{start + i}" if key else None,
        )
        for i in range(n)
    ]
    enqueue_many(tenant(), items)


def test_a_full_disk_refuses_writes_whole_and_the_worker_resumes_when_space_returns(
    small_disk: replication.Server, tmp_path: Path
) -> None:
    worker = Worker(tmp_path)
    refused: list[str] = []
    try:
        worker.gate.touch()
        _enqueue(WARM, 0)
        wait_until(lambda: _unsettled() == 0, 90)
        worker.gate.unlink()
        _enqueue(MID, WARM)
        wait_until(lambda: _count("SELECT count(*) FROM chaos_effect") == WARM + MID, 60)
        _fill(small_disk)
        # Enqueues until the item table's pages are full: each refused one stores nothing.
        for n in range(2_000):
            key = f"full-{n}"
            try:
                _enqueue(1, n, key="full-")
            except DatabaseError as exc:
                refused.append(str(exc).strip().splitlines()[0])
                assert (
                    _count(
                        "SELECT count(*) FROM workqueue_workitem WHERE idempotency_key = %s", [key]
                    )
                    == 0
                ), "a refused enqueue stored its item"
                if len(refused) >= 3:
                    break
        # The handlers mid-run end now: their writes are refused, kept, and said.
        worker.gate.touch()
        wait_until(lambda: NO_SPACE in worker.output(), 60)
        settles_refused = sum(NO_SPACE in line for line in worker.output().splitlines())
        _free(small_disk)
        freed_at = time.time()
        wait_until(lambda: _unsettled() == 0, 90)
        resumed_s = time.time() - freed_at
    finally:
        code = worker.stop()
    lost, doubled = _check_settled(tmp_path)
    _state(
        "disk",
        f"refused writes: {len(refused)} enqueues ({refused[0] if refused else 'none'}; each"
        f" stored nothing) and the settles of the {MID} items mid-handler (kept, said in"
        f" {settles_refused} line, sqlstate 53100), lost {lost}, doubled {doubled}, every item"
        f" settled {resumed_s:.1f} s after space was freed",
    )
    assert crash_tracebacks(worker.output()) == [], worker.output()[-4000:]
    assert code == 0, worker.output()[-4000:]
    assert refused and all(NO_SPACE in line for line in refused), refused
    assert 'sqlstate="53100"' in worker.output(), worker.output()[-4000:]  # the disk is full
    assert (lost, doubled) == (0, 0)


def test_a_settle_past_its_lock_timeout_writes_nothing_and_lands_later(
    cluster: replication.Server, tmp_path: Path
) -> None:
    with _owner(cluster) as conn:
        for login in ("workqueue_app", "workqueue_system"):
            conn.execute(f"ALTER ROLE {login} SET lock_timeout = '300ms'")
    worker = Worker(tmp_path)
    try:
        _enqueue(1, 0)
        wait_until(lambda: _count("SELECT count(*) FROM chaos_effect") == 1, 90)
        [(item,)] = query("SELECT id FROM workqueue_workitem")
        with _owner(cluster) as holder:
            holder.execute("BEGIN")
            holder.execute("SELECT FROM workqueue_workitem WHERE id = %s FOR UPDATE", [item])
            worker.gate.touch()  # the handler ends, and its settle meets the lock
            wait_until(lambda: LOCK_TIMEOUT in worker.output(), 60)
            assert _count("SELECT count(*) FROM workqueue_attempt") == 0  # nothing written
            holder.execute("ROLLBACK")
        released_at = time.time()
        wait_until(lambda: _unsettled() == 0, 60)
        settled_s = time.time() - released_at
    finally:
        code = worker.stop()
    lost, doubled = _check_settled(tmp_path)
    _state(
        "lock",
        f"a settle past lock_timeout refused ({LOCK_TIMEOUT}), settled {settled_s:.1f} s after"
        f" the lock was let go, lost {lost}, doubled {doubled}",
    )
    assert crash_tracebacks(worker.output()) == [], worker.output()[-4000:]
    assert code == 0, worker.output()[-4000:]
    assert (lost, doubled) == (0, 0)
    assert 'sqlstate="55P03"' in worker.output(), worker.output()[-4000:]  # lock timeout
