#!/usr/bin/env python3
"""What rate limits cost the claim: the claim's latency with no limit, one limit and 1,000
limits (none binding), as a ratio to none; and a drain (claims of 100) with the limits set but
not binding.

    .venv/bin/python bench/rate_limits.py [--items 5000] [--n 300] [--database-url URL]

Each config runs in a fresh database (``bench_rate_limits``) on the embedded server in
``.pgdata/`` (``python -m project.embedded start`` first) or the owner URL given. Items carry
one of 1,000 rate keys; ``one`` limits one key (1,000,000/s), ``thousand`` limits each of the
1,000 keys apart (1,000 limit rows). ``claim ms``: the median of ``--n`` claims of one item,
each completed; ``drain items/s``: claims of 100 until the lane is empty (each batch marked
done by one statement, outside the timing). The figure the issue sets: the drain within 1.1x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench" / "systems")]
CONFIGS = ("none", "one", "thousand")
KEYS = 1000
DBNAME = "bench_rate_limits"


def _fresh(admin_url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DBNAME}")
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + DBNAME, parts.query, ""))


def _fill(ctx: Any, n: int) -> None:
    from ours import KIND

    from workqueue.runtime import NewItem, enqueue_many

    for start in range(0, n, 1000):
        batch = range(start, min(n, start + 1000))
        enqueue_many(ctx, [NewItem(KIND, {"seq": i}, rate_key=f"acct-{i % KEYS}") for i in batch])


def _limit(config: str) -> None:
    from workqueue.rate_limits import set_rate_limit

    keys = {"none": 0, "one": 1, "thousand": KEYS}[config]
    for k in range(keys):
        set_rate_limit("bench", "key", f"acct-{k}", "1000000/s")


def _claims(n: int) -> float:
    from ours import KIND

    from tenancy.contexts import AppType, new_request_context
    from workqueue.claim import claim
    from workqueue.settle import complete

    rctx = new_request_context(AppType.WORKER)
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        [(item_ctx, item)] = claim(rctx, "default", [KIND], "bench", 30, 1)
        took.append((time.perf_counter() - t0) * 1000)
        complete(item_ctx, item)
    return statistics.median(took)


def _drain() -> float:
    from django.db import connections
    from ours import KIND

    from tenancy.contexts import AppType, new_request_context
    from workqueue.claim import claim

    rctx = new_request_context(AppType.WORKER)
    items, spent = 0, 0.0
    while True:
        t0 = time.perf_counter()
        got = claim(rctx, "default", [KIND], "bench", 30, 100)
        spent += time.perf_counter() - t0
        if not got:
            return items / spent
        items += len(got)
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "UPDATE workqueue_workitem SET status = 'done' WHERE id = ANY(%s)",
                [[item.id for _ctx, item in got]],
            )


def _run(dsn: str, config: str, items: int, n: int) -> tuple[float, float]:
    import ours

    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    _limit(config)
    _fill(ctx, items)
    return _claims(n), _drain()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--config", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    if args.config:  # one config, in this process (Django is set up once per process)
        claim_ms, drain = _run(args.database_url, args.config, args.items, args.n)
        print(f"{claim_ms:.3f} {drain:.0f}")
        return 0
    import subprocess

    admin_url = args.database_url
    if not admin_url:
        from project.database import embedded_urls
        from project.embedded import default_pgdata

        admin_url = embedded_urls(default_pgdata()).admin
    rows = []
    for config in CONFIGS:
        dsn = _fresh(admin_url)
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--config",
                config,
                "--database-url",
                dsn,
                "--items",
                str(args.items),
                "--n",
                str(args.n),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        rows.append((config, float(out[-2]), float(out[-1])))
    base_claim, base_drain = rows[0][1], rows[0][2]
    print(f"{'limits':<10} {'claim ms':>9} {'ratio':>6} {'drain items/s':>14} {'ratio':>6}")
    for config, claim_ms, drain in rows:
        print(
            f"{config:<10} {claim_ms:>9.3f} {claim_ms / base_claim:>6.2f}"
            f" {drain:>14.0f} {base_drain / drain:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
