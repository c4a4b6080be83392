"""`procrastinate` 3.x peer: PsycopgConnector, schema applied via its API, async no-op task.

Workers run `App.run_worker_async` with concurrency=1 per process and otherwise the
library's defaults (LISTEN/NOTIFY on, 5 s fallback polling, jobs kept after success).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# bench/systems is sys.path[0]; moved to the end so `import procrastinate` finds the
# library and not this file.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != _HERE] + [str(_HERE)]

import _common as c  # noqa: E402
import _pg  # noqa: E402
import procrastinate  # noqa: E402
from procrastinate.jobs import Status  # noqa: E402

SYSTEM = "procrastinate"
SETTINGS = {
    "concurrency": 1,
    "listen_notify": True,
    "delete_jobs": "never",
    "task": "async def noop(seq)",
    "version": procrastinate.__version__,
}
FILL_BATCH = 1_000


# Tasks live in __main__ on purpose (workers are this same script), so its warning
# about apps defined in the main module does not apply.
logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)


def make_app(dsn: str) -> tuple[procrastinate.App, Any]:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop(seq: int) -> None:
        c.record_wake(seq)

    return app, noop


async def setup(dsn: str) -> None:
    app, _ = make_app(dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def fill(dsn: str, n: int) -> None:
    app, noop = make_app(dsn)
    async with app.open_async():
        for start in range(0, n, FILL_BATCH):
            await noop.batch_defer_async(
                *({"seq": i} for i in range(start, min(start + FILL_BATCH, n)))
            )


async def worker(dsn: str, index: int, wait: bool) -> None:
    app, _ = make_app(dsn)
    async with app.open_async():
        await app.connector.execute_query_async("SELECT 1")  # pool is up before "go"
        c.worker_wait_for_go()
        await app.run_worker_async(concurrency=1, wait=wait, name=f"bench-{index}")
        if not wait:
            c.worker_done()


def worker_main() -> None:
    args = c.worker_args()
    asyncio.run(worker(args.dsn, args.index, wait=args.kind == "serve"))


def done_count(dsn: str) -> int:
    return _pg.scalar(dsn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")


def run_drain(args: argparse.Namespace) -> list[dict]:
    asyncio.run(setup(args.dsn))
    asyncio.run(fill(args.dsn, args.n))
    _pg.settle(args.dsn)
    with c.Workers(__file__, ["drain", "--dsn", args.dsn], args.procs) as workers:
        workers.wait_ready()
        t0 = workers.go()
        t1 = max(workers.wait_done(timeout=3600))
    done = done_count(args.dsn)
    if done != args.n:
        raise RuntimeError(f"drain: {done} of {args.n} succeeded")
    return [
        c.figure(
            f"drain_p{args.procs}",
            "items/s",
            args.n / (t1 - t0),
            n=args.n,
            seconds=round(t1 - t0, 3),
            verified_done=done,
            worker="wait=False",
            **SETTINGS,
        )
    ]


async def wake_enqueue(
    dsn: str, seqs: list[int], warm: list[int], interval_s: float, wake_file: Path
) -> dict[int, float]:
    app, noop = make_app(dsn)
    sent: dict[int, float] = {}
    async with app.open_async():
        for seq in warm + seqs:
            await noop.defer_async(seq=seq)
            sent[seq] = c.stamp()  # defer_async returned: the INSERT has committed
            if seq < 0:
                c.read_wake(wake_file, {seq}, timeout=30)
            await asyncio.sleep(interval_s)
    return sent


def run_wake(args: argparse.Namespace) -> list[dict]:
    asyncio.run(setup(args.dsn))
    wake_file = Path(tempfile.mkdtemp(prefix="bench-procrastinate-")) / "wake.txt"
    workers = c.Workers(__file__, ["serve", "--dsn", args.dsn], 1, env={c.WAKE_ENV: str(wake_file)})
    try:
        workers.wait_ready()
        workers.go()
        warm, seqs = c.wake_seqs(args.n)
        sent = asyncio.run(wake_enqueue(args.dsn, seqs, warm, args.interval_ms / 1000, wake_file))
        started = c.read_wake(wake_file, set(seqs), timeout=60)
    finally:
        workers.stop()
        shutil.rmtree(wake_file.parent, ignore_errors=True)
    return c.wake_figures(
        {s: sent[s] for s in seqs}, started, interval_ms=args.interval_ms, **SETTINGS
    )


async def enqueue(dsn: str, n: int, bulk_n: int, batch: int) -> tuple[float, float]:
    app, noop = make_app(dsn)
    async with app.open_async():
        t0 = time.perf_counter()
        for i in range(n):
            await noop.defer_async(seq=i)
        single = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for start in range(0, bulk_n, batch):
            await noop.batch_defer_async(
                *({"seq": i} for i in range(start, min(start + batch, bulk_n)))
            )
        bulk = bulk_n / (time.perf_counter() - t0)
    return single, bulk


def run_enqueue(args: argparse.Namespace) -> list[dict]:
    asyncio.run(setup(args.dsn))
    _pg.settle(args.dsn)  # the schema's creation settled before the timed part, as for every system
    single, bulk = asyncio.run(enqueue(args.dsn, args.n, args.bulk_n, args.batch))
    return [
        c.figure("enqueue_single", "items/s", single, n=args.n, how="task.defer_async"),
        c.figure(
            "enqueue_bulk",
            "items/s",
            bulk,
            n=args.bulk_n,
            batch=args.batch,
            how="task.batch_defer_async",
        ),
    ]


async def depth_fill_sql(dsn: str, depth: int) -> None:
    """Clone one row deferred through the API: the bulk API is ~20k/s, SQL much faster.

    The insert triggers (NOTIFY + events rows) still fire, as for a real defer.
    """
    app, noop = make_app(dsn)
    async with app.open_async():
        template = await noop.defer_async(seq=0)
    with _pg.connect(dsn) as conn:
        for start in range(1, depth, 100_000):
            conn.execute(
                """INSERT INTO procrastinate_jobs
                       (queue_name, task_name, priority, lock, queueing_lock, args, status,
                        scheduled_at, attempts)
                   SELECT queue_name, task_name, priority, lock, queueing_lock,
                          jsonb_build_object('seq', g), status, scheduled_at, attempts
                   FROM procrastinate_jobs, generate_series(%s::int, %s::int) AS g
                   WHERE id = %s""",
                (start, min(start + 100_000, depth) - 1, template),
            )


async def claims(dsn: str, n: int) -> tuple[list[float], list[float]]:
    """The worker's own calls: JobManager.fetch_job then finish_job (no handler)."""
    app, _ = make_app(dsn)
    claim_ms: list[float] = []
    cycle_ms: list[float] = []
    async with app.open_async():
        manager = app.job_manager
        worker_id = await manager.register_worker()
        for _ in range(n):
            t0 = time.perf_counter()
            job = await manager.fetch_job(queues=None, worker_id=worker_id)
            t1 = time.perf_counter()
            assert job is not None
            await manager.finish_job(job, status=Status.SUCCEEDED, delete_job=False)
            t2 = time.perf_counter()
            claim_ms.append((t1 - t0) * 1000)
            cycle_ms.append((t2 - t0) * 1000)
    return claim_ms, cycle_ms


def run_depth(args: argparse.Namespace) -> list[dict]:
    asyncio.run(setup(args.dsn))
    t0 = time.perf_counter()
    asyncio.run(depth_fill_sql(args.dsn, args.depth))
    fill_s = time.perf_counter() - t0
    _pg.settle(args.dsn)
    claim_ms, cycle_ms = asyncio.run(claims(args.dsn, args.n))
    return [
        c.figure(
            f"claim_depth_{args.depth}",
            "ms",
            c.median(claim_ms),
            depth=args.depth,
            claims=args.n,
            cycle_ms_median=round(c.median(cycle_ms), 4),
            claim_ms_p99=round(c.percentile(claim_ms, 99), 4),
            fill="1 defer_async row cloned by INSERT ... SELECT generate_series",
            fill_seconds=round(fill_s, 1),
            calls="job_manager.fetch_job/finish_job",
        )
    ]


RUNNERS = {"drain": run_drain, "wake": run_wake, "enqueue": run_enqueue, "depth": run_depth}


def main() -> None:
    if sys.argv[1:2] == ["_worker"]:
        worker_main()
        return
    args = c.parse_args(
        SYSTEM,
        list(RUNNERS),
        notes={"bloat": "not run (optional for peers)", "raw": "raw system only"},
    )
    c.emit(RUNNERS[args.workload](args))


if __name__ == "__main__":
    main()
