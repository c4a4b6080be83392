#!/usr/bin/env python3
"""Where a drain's time goes: one ``manage.py runworker`` (the shipped defaults) draining held-back
items, with the CPU it and the database server used, per item, beside the rate.

    .venv/bin/python bench/drain_cpu.py [--n 100000] [--reps 3] [--database-url URL]
                                        [--variant NAME:KEY=VALUE,...]...

The items are enqueued ahead, due only in an hour; the clock starts when one statement has made
them due (as ``bench/systems/ours.py``'s drain), and stops when none is left. The worker's CPU is
its process's (``/proc/<pid>/stat``), the server's the sum over every ``postgres`` process
(backends opened meanwhile included): on a machine with nothing else running, the two together
say how near the drain is to what the machine can do (cores used of ``os.cpu_count()``).
``--variant`` runs the same drain with other worker settings (environment variables of the
runworker, e.g. ``--variant capacity300:WORKER_CAPACITY=300``), alternating with the default
repetition by repetition. Without ``--database-url`` it uses the PostgreSQL at 127.0.0.1:5432
as ``postgres``, in a fresh database per run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench" / "systems")]
DBNAME = "bench_drain_cpu"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def _cpu_s(pids: list[int]) -> float:
    """User plus system CPU seconds of ``pids`` (those still alive)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _server_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-x", "postgres"], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def _variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, pairs = text.partition(":")
    env = dict(pair.split("=", 1) for pair in pairs.split(",") if pair)
    if not name or not env:
        raise argparse.ArgumentTypeError(f"--variant NAME:KEY=VALUE[,KEY=VALUE]; got {text!r}")
    return name, env


def drain_once(admin: str, n: int, env: dict[str, str]) -> dict[str, float]:
    import _pg
    import ours

    dsn = _pg.fresh_database(admin, DBNAME)
    from django.db import connections

    connections.close_all()
    ctx = ours.prepare(dsn)
    ours.fill(ctx, n, held_back=True)
    ours.settle(dsn)
    workers = ours.RunWorkers("default", 1, **env)
    worker_pid = workers.procs[0].pid
    try:
        server_before = _server_pids()
        worker_cpu, server_cpu = _cpu_s([worker_pid]), _cpu_s(server_before)
        with connections["admin"].cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")
            cursor.execute(
                "WITH due AS (UPDATE workqueue_workitem SET available_at = now()"
                " WHERE status = 'pending' RETURNING 1)"
                " SELECT count(*), pg_notify('work_available', 'default') FROM due"
            )
            t0 = time.time()
        while ours._left():
            time.sleep(0.01)
        seconds = time.time() - t0
        worker_cpu = _cpu_s([worker_pid]) - worker_cpu
        server_cpu = _cpu_s(sorted(set(server_before) | set(_server_pids()))) - server_cpu
    finally:
        workers.stop()
    done = ours.count("done")
    if done != n:
        raise RuntimeError(f"drain: {done} of {n} items done")
    return {
        "rate": n / seconds,
        "worker_cores": worker_cpu / seconds,
        "server_cores": server_cpu / seconds,
        "worker_us": worker_cpu / n * 1e6,
        "server_us": server_cpu / n * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="items per drain")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--database-url", default=DEFAULT_URL, help="an owner URL")
    parser.add_argument("--variant", type=_variant, action="append", default=[])
    args = parser.parse_args()
    import _pg
    import ours

    ours.setup_django(_pg.database_url(args.database_url, DBNAME))
    runs: dict[str, list[dict[str, float]]] = {"default": []}
    for name, _ in args.variant:
        runs[name] = []
    for rep in range(args.reps):
        for name, env in [("default", {}), *args.variant]:
            result = drain_once(args.database_url, args.n, env)
            runs[name].append(result)
            print(
                f"[rep {rep + 1}/{args.reps}] {name}: {result['rate']:,.0f} items/s, worker "
                f"{result['worker_cores']:.2f} cores, server {result['server_cores']:.2f}",
                flush=True,
            )
    print(f"\n{args.n:,} items, one runworker, medians of {args.reps} ({os.cpu_count()} CPUs)")
    header = "run", "items/s", "worker cores", "server cores", "worker µs/item", "server µs/item"
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for name, results in runs.items():
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        print(
            f"| {name} | {med['rate']:,.0f} | {med['worker_cores']:.2f} | "
            f"{med['server_cores']:.2f} | {med['worker_us']:.0f} | {med['server_us']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
