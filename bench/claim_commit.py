#!/usr/bin/env python3
"""The drain rate with the claim committed durably (the default) and asynchronously, side by
side (issue 13: the database-restart case decides the default with numbers).

    .venv/bin/python bench/claim_commit.py [--n 20000] [--procs 1] [--reps 3] [--database-url URL]

Each run is ``bench/systems/ours.py drain`` (``manage.py runworker`` subprocesses with the
shipped defaults; ``async_claim`` adds ``WORKQUEUE_CLAIM_DURABLE=false``) in a fresh database;
the two modes alternate, so drift on a shared machine falls on both. Without
``--database-url`` it uses the embedded server in ``.pgdata/`` (``python -m project.embedded
start`` first). Prints each run, then min / median / max per mode and the ratio of medians.
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
MODES = {"durable": "default", "async": "async_claim"}
DBNAME = "bench_claim_commit"


def _db(admin_url: str, dbname: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, ""))


def _recreate(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DBNAME}")


def _drain(admin_url: str, mode: str, n: int, procs: int) -> float:
    _recreate(admin_url)
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "systems" / "ours.py"),
            "drain",
            "--dsn",
            _db(admin_url, DBNAME),
            "--config",
            MODES[mode],
            "--n",
            str(n),
            "--procs",
            str(procs),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} drain failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return float(json.loads(lines[-1])["value"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="items per drain")
    parser.add_argument("--procs", type=int, default=1, help="runworker processes")
    parser.add_argument("--reps", type=int, default=3, help="runs per mode")
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    admin_url = args.database_url
    if not admin_url:
        sys.path.insert(0, str(REPO))
        from project.database import embedded_urls
        from project.embedded import default_pgdata

        admin_url = _db(embedded_urls(default_pgdata()).admin, "postgres")
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for rep in range(args.reps):
            for mode in MODES if rep % 2 == 0 else reversed(MODES):
                rate = _drain(admin_url, mode, args.n, args.procs)
                rates[mode].append(rate)
                print(f"rep {rep + 1} {mode:8} {rate:10,.0f} items/s", flush=True)
    finally:
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
    print(f"drain of {args.n:,} items, {args.procs} runworker process(es), {args.reps} reps:")
    for mode, values in rates.items():
        print(
            f"  {mode:8} min {min(values):8,.0f}  median {statistics.median(values):8,.0f}"
            f"  max {max(values):8,.0f} items/s"
        )
    ratio = statistics.median(rates["async"]) / statistics.median(rates["durable"])
    print(f"  async / durable (medians): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
