"""`pgqueuer` peer: asyncpg driver, schema installed via `Queries.install()` (what
`pgq install` runs), async no-op entrypoint, QueueManager with its default batch_size=10.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

# bench/systems is sys.path[0]; moved to the end so `import pgqueuer` finds the library
# and not this file.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != _HERE] + [str(_HERE)]

import _common as c  # noqa: E402
import _pg  # noqa: E402
import asyncpg  # noqa: E402
import pgqueuer  # noqa: E402
import uvloop  # noqa: E402
from pgqueuer import Job, Queries, QueueManager  # noqa: E402
from pgqueuer.domain.types import QueueExecutionMode  # noqa: E402
from pgqueuer.ports.repository import EntrypointExecutionParameter  # noqa: E402

SYSTEM = "pgqueuer"
ENTRYPOINT = "noop"
BATCH_SIZE = 10  # QueueManager.run's default
SETTINGS = {
    "batch_size": BATCH_SIZE,
    "driver": "asyncpg (1 connection per process)",
    "entrypoint_concurrency_limit": 0,
    "task": "async def noop(job)",
    "event_loop": "uvloop (as pgq run)",
    "version": pgqueuer.__version__,
}
FILL_BATCH = 10_000


def payload(seq: int) -> bytes:
    return json.dumps({"seq": seq}).encode()


async def queries(dsn: str) -> Queries:
    return Queries.from_asyncpg_connection(await asyncpg.connect(dsn))


async def setup(dsn: str, fill: int = 0) -> None:
    q = await queries(dsn)
    await q.install()
    for start in range(0, fill, FILL_BATCH):
        size = min(FILL_BATCH, fill - start)
        await q.enqueue(
            [ENTRYPOINT] * size, [payload(i) for i in range(start, start + size)], [0] * size
        )


async def worker(dsn: str, mode: QueueExecutionMode) -> None:
    qm = QueueManager(await queries(dsn))

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        c.record_wake(json.loads(job.payload or b"{}")["seq"])

    c.worker_wait_for_go()
    # drain mode returns once the queue is empty; the status-log buffer is flushed
    # (= completions written) before run() returns.
    await qm.run(batch_size=BATCH_SIZE, mode=mode)
    if mode is QueueExecutionMode.drain:
        c.worker_done()


def worker_main() -> None:
    args = c.worker_args()
    mode = QueueExecutionMode.drain if args.kind == "drain" else QueueExecutionMode.continuous
    # `pgq run` runs its workers on uvloop (a pgqueuer dependency); so do we.
    uvloop.run(worker(args.dsn, mode))


def run_drain(args: argparse.Namespace) -> list[dict]:
    asyncio.run(setup(args.dsn, args.n))
    _pg.settle(args.dsn)
    with c.Workers(__file__, ["drain", "--dsn", args.dsn], args.procs) as workers:
        workers.wait_ready()
        t0 = workers.go()
        t1 = max(workers.wait_done(timeout=3600))
    # Finished jobs leave the queue table; each one is logged in pgqueuer_log.
    left = _pg.scalar(args.dsn, "SELECT count(*) FROM pgqueuer")
    done = _pg.scalar(args.dsn, "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")
    if left or done != args.n:
        raise RuntimeError(f"drain: {done} of {args.n} successful, {left} left in queue")
    return [
        c.figure(
            f"drain_p{args.procs}",
            "items/s",
            args.n / (t1 - t0),
            n=args.n,
            seconds=round(t1 - t0, 3),
            verified_done=done,
            worker="mode=drain",
            **SETTINGS,
        )
    ]


async def wake_enqueue(
    dsn: str, seqs: list[int], warm: list[int], interval_s: float, wake_file: Path
) -> dict[int, float]:
    q = await queries(dsn)
    sent: dict[int, float] = {}
    for seq in warm + seqs:
        await q.enqueue(ENTRYPOINT, payload(seq))
        sent[seq] = c.stamp()  # asyncpg autocommits: the INSERT has committed
        if seq < 0:
            c.read_wake(wake_file, {seq}, timeout=30)
        await asyncio.sleep(interval_s)
    return sent


def run_wake(args: argparse.Namespace) -> list[dict]:
    asyncio.run(setup(args.dsn))
    wake_file = Path(tempfile.mkdtemp(prefix="bench-pgqueuer-")) / "wake.txt"
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
    q = await queries(dsn)
    t0 = time.perf_counter()
    for i in range(n):
        await q.enqueue(ENTRYPOINT, payload(i))
    single = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for start in range(0, bulk_n, batch):
        size = min(batch, bulk_n - start)
        await q.enqueue(
            [ENTRYPOINT] * size, [payload(i) for i in range(start, start + size)], [0] * size
        )
    bulk = bulk_n / (time.perf_counter() - t0)
    return single, bulk


def run_enqueue(args: argparse.Namespace) -> list[dict]:
    asyncio.run(setup(args.dsn))
    _pg.settle(args.dsn)  # the schema's creation settled before the timed part, as for every system
    single, bulk = asyncio.run(enqueue(args.dsn, args.n, args.bulk_n, args.batch))
    return [
        c.figure("enqueue_single", "items/s", single, n=args.n, how="Queries.enqueue(str)"),
        c.figure(
            "enqueue_bulk",
            "items/s",
            bulk,
            n=args.bulk_n,
            batch=args.batch,
            how="Queries.enqueue(list)",
        ),
    ]


async def claims(dsn: str, n: int) -> tuple[list[float], list[float]]:
    """QueueManager's own calls: Queries.dequeue(batch_size=1) then log_jobs."""
    q = await queries(dsn)
    entrypoints = {ENTRYPOINT: EntrypointExecutionParameter(concurrency_limit=0)}
    qm_id = uuid.uuid4()
    claim_ms: list[float] = []
    cycle_ms: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        jobs = await q.dequeue(
            batch_size=1,
            entrypoints=entrypoints,
            queue_manager_id=qm_id,
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=30),
        )
        t1 = time.perf_counter()
        assert len(jobs) == 1
        await q.log_jobs([(jobs[0], "successful", None)])
        t2 = time.perf_counter()
        claim_ms.append((t1 - t0) * 1000)
        cycle_ms.append((t2 - t0) * 1000)
    return claim_ms, cycle_ms


def run_depth(args: argparse.Namespace) -> list[dict]:
    t0 = time.perf_counter()
    asyncio.run(setup(args.dsn, args.depth))
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
            fill=f"bulk Queries.enqueue, {FILL_BATCH:,} per call",
            fill_seconds=round(fill_s, 1),
            calls="Queries.dequeue(1)/log_jobs",
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
        notes={
            "concurrency": "QueueManager runs each dequeued batch's jobs as concurrent asyncio "
            "tasks; there is no per-process concurrency=1 knob",
            "bloat": "not run (optional for peers)",
            "raw": "raw system only",
        },
    )
    c.emit(RUNNERS[args.workload](args))


if __name__ == "__main__":
    main()
