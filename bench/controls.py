#!/usr/bin/env python3
"""What each of the claim's controls costs the claim (issue 20): claim latency at 10,000 and
1,000,000 waiting items, with and without concurrency keys and caps in use, side by side.

    .venv/bin/python bench/controls.py [--depths 10000,1000000] [--n 500] [--reps 1]
                                       [--configs default,keyed,...] [--database-url URL]

Each run is ``bench/systems/ours.py depth --config <config>`` (the median of ``--n`` claims of
one item, each followed by its completion, after 20 to warm up) in a fresh database: ``default``
(no control in use: the claim still reads the pause table), ``keyed`` (every item carries one
of 1,000 concurrency keys), ``lane_capped`` (``WORKQUEUE_LANE_CAPS=default=1000``: counted,
one claimer of the lane at a time), ``kind_capped`` (``Kind.max_running=1000``),
``keyed_capped`` (both), ``paused_other`` (another kind of the lane paused), and
``one_key_held`` (every item shares one key, whose first item is held: the claim finds
nothing, walking past the key's backlog; ``--n`` / 50 claims of it). The configs alternate
within each depth, so drift on a shared machine falls on all. Without ``--database-url`` it
uses the embedded server in ``.pgdata/`` (``python -m project.embedded start`` first). Prints
each run, then per depth the median claim latency of each config and its ratio to ``default``.
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
CONFIGS = [
    "default",
    "keyed",
    "lane_capped",
    "kind_capped",
    "keyed_capped",
    "paused_other",
    "one_key_held",
]
DBNAME = "bench_controls"


def _db(admin_url: str, dbname: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, ""))


def _recreate(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DBNAME}")


def _depth(admin_url: str, config: str, depth: int, n: int) -> dict:
    _recreate(admin_url)
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "systems" / "ours.py"),
            "depth",
            "--dsn",
            _db(admin_url, DBNAME),
            "--config",
            config,
            "--depth",
            str(depth),
            "--n",
            # A claim walking a held key's backlog is slow: fewer of them tell as much.
            str(max(5, n // 50) if config == "one_key_held" else n),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"{config} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", default="10000,1000000", help="waiting items, comma-separated")
    parser.add_argument("--n", type=int, default=500, help="claims measured per run")
    parser.add_argument("--reps", type=int, default=1, help="runs per config and depth")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="which, comma-separated")
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    configs = args.configs.split(",")
    if "default" not in configs:
        configs.insert(0, "default")
    admin_url = args.database_url
    if not admin_url:
        sys.path.insert(0, str(REPO))
        from project.database import embedded_urls
        from project.embedded import default_pgdata

        admin_url = _db(embedded_urls(default_pgdata()).admin, "postgres")
    depths = [int(d) for d in args.depths.split(",")]
    results: dict[tuple[int, str], list[dict]] = {}
    try:
        for depth in depths:
            for rep in range(args.reps):
                for config in configs if rep % 2 == 0 else list(reversed(configs)):
                    figure = _depth(admin_url, config, depth, args.n)
                    results.setdefault((depth, config), []).append(figure)
                    print(
                        f"depth {depth:>9,} rep {rep + 1} {config:13} claim"
                        f" {figure['value']:7.3f} ms  (claim + complete"
                        f" {figure['extra'].get('cycle_ms_median', 0):7.3f} ms)",
                        flush=True,
                    )
    finally:
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
    print(f"\nclaim latency, median of {args.n} claims of one item, {args.reps} rep(s):")
    print(f"  {'config':13} " + "".join(f"{d:>14,} waiting" for d in depths))
    for config in configs:
        cells = []
        for depth in depths:
            claim = statistics.median(f["value"] for f in results[(depth, config)])
            base = statistics.median(f["value"] for f in results[(depth, "default")])
            cells.append(f"{claim:8.3f} ms {claim / base:5.2f}x")
        print(f"  {config:13} " + "".join(f"{c:>22}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
