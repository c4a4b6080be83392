"""`raw`: a bare psycopg 3 claim/complete loop over a minimal table - the "raw limit".

Claim = UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT k) RETURNING,
complete = one UPDATE ... WHERE id = ANY(ids); every statement autocommits. No
retries, leases, heartbeats or NOTIFY on plain enqueue: the floor any queue pays.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/systems is sys.path[0]; moved to the end so that library names win over the
# adapter scripts named after them (procrastinate.py, pgqueuer.py).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != _HERE] + [str(_HERE)]

import _common as c  # noqa: E402
import _pg  # noqa: E402
import psycopg  # noqa: E402

SYSTEM = "raw"
SCHEMA = """
CREATE TABLE raw_jobs (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending',
    payload jsonb NOT NULL DEFAULT '{}',
    available_at timestamptz NOT NULL DEFAULT now(),
    claimed_at timestamptz,
    completed_at timestamptz,
    attempts integer NOT NULL DEFAULT 0
);
-- Only pending rows are indexed, so completed rows cost the claim nothing once vacuumed.
CREATE INDEX raw_jobs_pending_idx ON raw_jobs (available_at, id) WHERE status = 'pending';
"""
CLAIM = """
UPDATE raw_jobs SET status = 'running', claimed_at = now(), attempts = attempts + 1
WHERE id IN (
    SELECT id FROM raw_jobs
    WHERE status = 'pending' AND available_at <= now()
    ORDER BY available_at, id
    LIMIT {k}
    FOR UPDATE SKIP LOCKED
)
RETURNING id, payload
"""


def claim_sql(k: int) -> str:
    # k inlined, not a bind parameter: with `LIMIT $1` the cached generic plan cannot
    # see how small the limit is and costs ~0.15 ms more per claim (pgbench inlines too).
    return CLAIM.format(k=int(k))


COMPLETE = "UPDATE raw_jobs SET status = 'done', completed_at = now() WHERE id = ANY(%s)"
FILL = (
    "INSERT INTO raw_jobs (payload) SELECT jsonb_build_object('seq', g)"
    " FROM generate_series(1, %s) AS g"
)
CHANNEL = "raw_jobs"

# pgbench runs the same two statements; the claimed ids travel via \gset as an array.
PGBENCH_SCRIPT = """\
WITH c AS (
  UPDATE raw_jobs SET status = 'running', claimed_at = now(), attempts = attempts + 1
  WHERE id IN (SELECT id FROM raw_jobs WHERE status = 'pending' AND available_at <= now()
               ORDER BY available_at, id LIMIT {k} FOR UPDATE SKIP LOCKED)
  RETURNING id)
SELECT array_agg(id) AS ids FROM c \\gset
UPDATE raw_jobs SET status = 'done', completed_at = now() WHERE id = ANY(:ids::bigint[]);
"""


def handle(payload: dict) -> None:
    """The no-op job body."""


def reset(dsn: str, fill: int = 0) -> None:
    with _pg.connect(dsn) as conn:
        conn.execute("DROP TABLE IF EXISTS raw_jobs")
        conn.execute(SCHEMA)
        if fill:
            conn.execute(FILL, (fill,))
    _pg.settle(dsn)


def drain_loop(conn: psycopg.Connection, k: int) -> int:
    done = 0
    while True:
        rows = conn.execute(claim_sql(k)).fetchall()
        if not rows:
            return done
        for _id, payload in rows:
            handle(payload)
        conn.execute(COMPLETE, ([r[0] for r in rows],))
        done += len(rows)


def serve_loop(dsn: str, k: int) -> None:
    """Idle worker: claim until empty, then block on LISTEN (1 s poll as a fallback)."""
    with _pg.connect(dsn) as listen, _pg.connect(dsn) as work:
        # A separate LISTEN connection: a NOTIFY that arrives while `work` is busy
        # with a claim can't be missed.
        listen.execute(f"LISTEN {CHANNEL}")
        c.worker_wait_for_go()
        while True:
            while True:
                rows = work.execute(claim_sql(k)).fetchall()
                if not rows:
                    break
                for _id, payload in rows:
                    c.record_wake(payload["seq"])
                    handle(payload)
                work.execute(COMPLETE, ([r[0] for r in rows],))
            for _ in listen.notifies(timeout=1.0, stop_after=1):
                pass


def worker_main() -> None:
    args = c.worker_args()
    if args.kind == "serve":
        serve_loop(args.dsn, args.batch)
        return
    with _pg.connect(args.dsn) as conn:
        conn.execute("SELECT 1")
        c.worker_wait_for_go()
        drain_loop(conn, args.batch)
        c.worker_done()


def timed_drain(dsn: str, n: int, procs: int, k: int) -> tuple[float, dict]:
    """Fill n, then time `procs` worker processes from "go" to queue empty."""
    reset(dsn, n)
    with c.Workers(__file__, ["drain", "--dsn", dsn, "--batch", str(k)], procs) as workers:
        workers.wait_ready()
        t0 = workers.go()
        t1 = max(workers.wait_done(timeout=600))
    done = _pg.scalar(dsn, "SELECT count(*) FROM raw_jobs WHERE status = 'done'")
    if done != n:
        raise RuntimeError(f"drain: {done} of {n} done")
    return n / (t1 - t0), {"seconds": round(t1 - t0, 3), "verified_done": done}


def run_drain(args: argparse.Namespace) -> list[dict]:
    k = 100
    rate, extra = timed_drain(args.dsn, args.n, args.procs, k)
    return [c.figure(f"drain_p{args.procs}", "items/s", rate, n=args.n, k=k, **extra)]


def run_wake(args: argparse.Namespace) -> list[dict]:
    reset(args.dsn)
    wake_file = Path(tempfile.mkdtemp(prefix="bench-raw-")) / "wake.txt"
    workers = c.Workers(
        __file__, ["serve", "--dsn", args.dsn, "--batch", "1"], 1, env={c.WAKE_ENV: str(wake_file)}
    )
    try:
        workers.wait_ready()
        workers.go()
        warm, seqs = c.wake_seqs(args.n)
        sent: dict[int, float] = {}
        with _pg.connect(args.dsn) as conn:
            for seq in warm + seqs:
                with conn.transaction():
                    conn.execute(
                        "INSERT INTO raw_jobs (payload) VALUES (%s)", (json.dumps({"seq": seq}),)
                    )
                    conn.execute(f"NOTIFY {CHANNEL}")
                sent[seq] = c.stamp()  # right after COMMIT returned
                if seq < 0:
                    c.read_wake(wake_file, {seq}, timeout=30)  # settle each warm-up item
                time.sleep(args.interval_ms / 1000)
        started = c.read_wake(wake_file, set(seqs), timeout=60)
    finally:
        workers.stop()
        shutil.rmtree(wake_file.parent, ignore_errors=True)
    return c.wake_figures(
        {s: sent[s] for s in seqs},
        started,
        notify="LISTEN/NOTIFY",
        k=1,
        interval_ms=args.interval_ms,
    )


def run_enqueue(args: argparse.Namespace) -> list[dict]:
    reset(args.dsn)
    _pg.settle(args.dsn)  # the schema's creation settled before the timed part, as for every system
    with _pg.connect(args.dsn) as conn:
        t0 = time.perf_counter()
        for i in range(args.n):
            conn.execute("INSERT INTO raw_jobs (payload) VALUES (%s)", (json.dumps({"seq": i}),))
        single = args.n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for start in range(0, args.bulk_n, args.batch):
            # COPY is PostgreSQL's fastest ingest path; one transaction per batch.
            with conn.cursor().copy("COPY raw_jobs (payload) FROM STDIN") as copy:
                for i in range(start, min(start + args.batch, args.bulk_n)):
                    copy.write_row((json.dumps({"seq": i}),))
        bulk = args.bulk_n / (time.perf_counter() - t0)
    return [
        c.figure("enqueue_single", "items/s", single, n=args.n, how="INSERT, autocommit"),
        c.figure(
            "enqueue_bulk", "items/s", bulk, n=args.bulk_n, batch=args.batch, how="COPY per batch"
        ),
    ]


def run_depth(args: argparse.Namespace) -> list[dict]:
    t0 = time.perf_counter()
    reset(args.dsn, args.depth)
    fill_s = time.perf_counter() - t0
    claim_ms: list[float] = []
    cycle_ms: list[float] = []
    with _pg.connect(args.dsn) as conn:
        for _ in range(args.n):
            t0 = time.perf_counter()
            rows = conn.execute(claim_sql(1)).fetchall()
            t1 = time.perf_counter()
            conn.execute(COMPLETE, ([r[0] for r in rows],))
            t2 = time.perf_counter()
            claim_ms.append((t1 - t0) * 1000)
            cycle_ms.append((t2 - t0) * 1000)
    return [
        c.figure(
            f"claim_depth_{args.depth}",
            "ms",
            c.median(claim_ms),
            depth=args.depth,
            claims=args.n,
            cycle_ms_median=round(c.median(cycle_ms), 4),
            claim_ms_p99=round(c.percentile(claim_ms, 99), 4),
            fill="INSERT ... SELECT generate_series",
            fill_seconds=round(fill_s, 1),
        )
    ]


def run_bloat(args: argparse.Namespace) -> list[dict]:
    k = 100
    fresh, fresh_extra = timed_drain(args.dsn, args.n, 1, k)
    # Push `churn` items through the real claim/complete loop (untimed), then one
    # VACUUM - the "sweep" - and measure the same drain again on the churned table.
    t0 = time.perf_counter()
    with _pg.connect(args.dsn) as conn:
        for start in range(0, args.churn, 200_000):
            conn.execute(FILL, (min(200_000, args.churn - start),))
            drain_loop(conn, k)
    churn_s = time.perf_counter() - t0
    _pg.vacuum(args.dsn, "raw_jobs")
    with _pg.connect(args.dsn) as conn:
        conn.execute(FILL, (args.n,))
    _pg.settle(args.dsn)
    with c.Workers(__file__, ["drain", "--dsn", args.dsn, "--batch", str(k)], 1) as workers:
        workers.wait_ready()
        t0w = workers.go()
        t1w = max(workers.wait_done(timeout=600))
    after = args.n / (t1w - t0w)
    size = _pg.scalar(args.dsn, "SELECT pg_size_pretty(pg_total_relation_size('raw_jobs'))")
    return [
        c.figure("bloat_fresh", "items/s", fresh, n=args.n, k=k, **fresh_extra),
        c.figure(
            "bloat_churned",
            "items/s",
            after,
            n=args.n,
            k=k,
            churn=args.churn,
            churn_seconds=round(churn_s, 1),
            sweep="VACUUM (ANALYZE) raw_jobs",
            table_size=size,
        ),
    ]


def pgbench(dsn: str, k: int, clients: int, seconds: float) -> tuple[float, dict]:
    # Enough pending rows that the run never drains the table (checked below).
    rows = int(seconds * (40_000 if k == 1 else 200_000))
    reset(dsn, rows)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as fh:
        fh.write(PGBENCH_SCRIPT.format(k=k))
    cmd = [
        "pgbench",
        "-n",
        "-M",
        "prepared",
        "-f",
        fh.name,
        "-c",
        str(clients),
        "-j",
        str(clients),
        "-T",
        str(max(1, round(seconds))),
        dsn,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    Path(fh.name).unlink()
    match = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if not match:
        raise RuntimeError(f"pgbench output not understood:\n{out}")
    tps = float(match.group(1))
    pending = _pg.scalar(dsn, "SELECT count(*) FROM raw_jobs WHERE status = 'pending'")
    done = _pg.scalar(dsn, "SELECT count(*) FROM raw_jobs WHERE status = 'done'")
    if pending == 0:
        raise RuntimeError("pgbench drained the whole table: fill more rows")
    return tps * k, {
        "tps": tps,
        "k": k,
        "clients": clients,
        "seconds": seconds,
        "done_rows": done,
        "prefilled": rows,
        "mode": "-M prepared",
    }


def run_raw(args: argparse.Namespace) -> list[dict]:
    figs: list[dict] = []
    for procs in (1, 2):
        for k in (1, 100):
            rate, extra = timed_drain(args.dsn, args.n, procs, k)
            figs.append(c.figure(f"raw_k{k}_p{procs}", "items/s", rate, n=args.n, k=k, **extra))
    for clients in (1, 2):
        for k in (1, 100):
            rate, extra = pgbench(args.dsn, k, clients, args.seconds)
            figs.append(c.figure(f"pgbench_k{k}_c{clients}", "items/s", rate, **extra))
    return figs


RUNNERS = {
    "drain": run_drain,
    "wake": run_wake,
    "enqueue": run_enqueue,
    "depth": run_depth,
    "bloat": run_bloat,
    "raw": run_raw,
}


def main() -> None:
    if sys.argv[1:2] == ["_worker"]:
        worker_main()
        return
    args = c.parse_args(
        SYSTEM,
        list(RUNNERS),
        notes={
            "drain": "k=100 per claim (the raw limit); the `raw` workload has k=1 too",
            "enqueue": "single = plain INSERT (no NOTIFY); bulk = COPY per 1,000",
        },
    )
    c.emit(RUNNERS[args.workload](args))


if __name__ == "__main__":
    main()
