#!/usr/bin/env python3
"""What the pooler-safe mode costs (issue 18): drain and enqueue with prepared statements (the
default), without them (``DATABASE_POOLER=transaction``, still on direct connections), and
through a real PgBouncer in transaction pooling, side by side.

    .venv/bin/python bench/pooler.py [--n 20000] [--single 2000] [--bulk 20000] [--reps 3]
                                     [--database-url URL]

Each run is ``bench/systems/ours.py`` (``drain``: ``manage.py runworker`` subprocesses with the
shipped defaults; ``enqueue``: ``--single`` single enqueues, then ``--bulk`` items through
``enqueue_many`` in statements of 1,000) in a fresh database, configs ``default``,
``pooler_safe`` and ``pgbouncer`` (the adapter starts the PgBouncer: Debian's ``pgbouncer``
must be installed). The modes rotate from one repetition to the next, so drift on a shared
machine falls on all of them. Without ``--database-url`` it uses the embedded server in
``.pgdata/`` (``python -m project.embedded start`` first). Prints each run, then the median
per mode and its ratio to the default's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
MODES = {"prepared": "default", "no prepares": "pooler_safe", "pgbouncer": "pgbouncer"}
DBNAME = "bench_pooler"


def _db(admin_url: str, dbname: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, ""))


def _recreate(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DBNAME}")


def _run(admin_url: str, mode: str, workload: str, options: list[str]) -> dict[str, float]:
    _recreate(admin_url)
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "systems" / "ours.py"),
            workload,
            "--dsn",
            _db(admin_url, DBNAME),
            "--config",
            MODES[mode],
            *options,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} {workload} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    figures = json.loads(lines[-1])
    figures = figures if isinstance(figures, list) else [figures]
    return {f["figure"]: float(f["value"]) for f in figures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="items per drain")
    parser.add_argument("--procs", type=int, default=1, help="runworker processes per drain")
    parser.add_argument("--single", type=int, default=2_000, help="single enqueues")
    parser.add_argument("--bulk", type=int, default=20_000, help="items enqueued in bulk")
    parser.add_argument("--reps", type=int, default=3, help="runs per mode")
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    admin_url = args.database_url
    if not admin_url:
        sys.path.insert(0, str(REPO))
        from project.database import embedded_urls
        from project.embedded import default_pgdata

        admin_url = _db(embedded_urls(default_pgdata()).admin, "postgres")
    workloads = {
        "drain": ["--n", str(args.n), "--procs", str(args.procs)],
        "enqueue": ["--n", str(args.single), "--bulk-n", str(args.bulk), "--batch", "1000"],
    }
    rates: dict[str, dict[str, list[float]]] = {}
    modes = list(MODES)
    try:
        for rep in range(args.reps):
            for mode in modes[rep % len(modes) :] + modes[: rep % len(modes)]:
                for workload, options in workloads.items():
                    for figure, value in _run(admin_url, mode, workload, options).items():
                        rates.setdefault(figure, {}).setdefault(mode, []).append(value)
                        print(f"rep {rep + 1} {mode:12} {figure:15} {value:10,.0f}", flush=True)
    finally:
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
    print(
        f"\nmedians of {args.reps} runs (items/s; drain of {args.n:,} by {args.procs} "
        f"runworker, {args.single:,} single enqueues, {args.bulk:,} in bulk), ratio to prepared:"
    )
    print(f"{'figure':15}" + "".join(f"{mode:>22}" for mode in MODES))
    for figure, by_mode in rates.items():
        base = statistics.median(by_mode["prepared"])
        cells = []
        for mode in MODES:
            median = statistics.median(by_mode[mode])
            cells.append(f"{median:>13,.0f} ({median / base:4.2f}x)")
        print(f"{figure:15}" + "".join(f"{cell:>22}" for cell in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
