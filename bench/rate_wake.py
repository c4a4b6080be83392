#!/usr/bin/env python3
"""How late a worker claims an item a rate limit held back, after the limit allows it: the
delay between a bucket's free_at and the claim that takes its next item.

    .venv/bin/python bench/rate_wake.py [--items 20] [--rate 10] [--workers 1,4] [--rounds 2]
                                        [--against CHECKOUT] [--database-url URL]

Each run, in a fresh database (``bench_rate_wake``) on the embedded server (``EMBEDDED_PGDATA``)
or the owner URL given: a limit of ``--rate``/s with a burst of 1 on one rate key, ``--items``
items carrying it, and ``--workers`` ``manage.py runworker`` processes with the shipped
defaults (a poll of a second). With a burst of 1 each claim takes one item, and the bucket
allows the next one ``1 / rate`` s after it: item k+1's delay is its ``claimed_at`` minus item
k's, minus that interval, by the database's clock. ``--against`` another checkout (e.g. an
export of the main branch, with its own ``.venv`` link): each round runs it too, alternating.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
DBNAME = "bench_rate_wake"


class Result(NamedTuple):
    # The delays after free_at, in ms: median, 90th percentile, largest.
    p50_ms: float
    p90_ms: float
    max_ms: float
    # What the key got, items a second, from its first claim to its last.
    rate: float


def _fresh(admin_url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DBNAME}")
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + DBNAME, parts.query, ""))


def _run(dsn: str, items: int, rate: int, workers: int) -> Result:
    import ours

    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    from workqueue.models import WorkItem
    from workqueue.rate_limits import set_rate_limit
    from workqueue.runtime import NewItem, enqueue_many

    set_rate_limit("bench", "key", "acct", f"{rate}/s", burst=1)
    run = ours.RunWorkers("default", workers)
    try:
        new = [NewItem(ours.KIND, {"seq": n}, rate_key="acct") for n in range(items)]
        ids = [item_id for item_id, _outcome in enqueue_many(ctx, new)]
        done = WorkItem.objects.using("admin").filter(id__in=ids, status="done")
        deadline = time.monotonic() + items * 2 + 30
        while done.count() < items and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        run.stop()
    rows = WorkItem.objects.using("admin").filter(id__in=ids, claimed_at__isnull=False)
    claimed = sorted(rows.values_list("claimed_at", flat=True))
    interval_s = 1 / rate
    delays = sorted(((b - a).total_seconds() - interval_s) * 1000 for a, b in pairwise(claimed))
    span_s = (claimed[-1] - claimed[0]).total_seconds()
    return Result(
        statistics.median(delays),
        delays[int(0.9 * (len(delays) - 1))],
        delays[-1],
        (len(claimed) - 1) / span_s,
    )


def _one(code: Path, admin_url: str, items: int, rate: int, workers: int) -> Result:
    """One run in a fresh database, in a process of its own, on ``code`` (a checkout)."""
    import subprocess

    args = ["--items", str(items), "--rate", str(rate), "--workers", str(workers)]
    out = subprocess.run(
        [sys.executable, __file__, "--code", str(code), "--one", _fresh(admin_url), *args],
        cwd=code,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return Result(*(float(v) for v in out[-4:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--rate", type=int, default=10)
    parser.add_argument("--workers", default="1,4", help="runworker processes, one run each")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", type=Path, help="another checkout, run alternately")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--code", type=Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    if args.one:  # one run, in this process (Django is set up once per process)
        code = args.code.resolve()
        sys.path[:0] = [str(code), str(code / "bench" / "systems")]
        result = _run(args.one, args.items, args.rate, int(args.workers))
        print(" ".join(f"{v:.3f}" for v in result))
        return 0
    sys.path[:0] = [str(REPO)]
    admin_url = args.database_url
    if not admin_url:
        from project.database import embedded_urls
        from project.embedded import default_pgdata

        admin_url = embedded_urls(default_pgdata()).admin
    checkouts = {"this": REPO}
    if args.against:
        checkouts["against"] = args.against.resolve()
    order = [(name, int(w)) for w in args.workers.split(",") for name in checkouts]
    print(
        f"{'round':<6} {'checkout':<8} {'workers':>7} {'p50 ms':>8} {'p90 ms':>8}"
        f" {'max ms':>8} {'items/s':>8}"
    )
    for r in range(args.rounds):
        for name, workers in order if r % 2 == 0 else order[::-1]:
            res = _one(checkouts[name], admin_url, args.items, args.rate, workers)
            print(
                f"{r + 1:<6} {name:<8} {workers:>7} {res.p50_ms:>8.1f} {res.p90_ms:>8.1f}"
                f" {res.max_ms:>8.1f} {res.rate:>8.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
