#!/usr/bin/env python3
"""What recording each attempt costs the batch completion: ``complete_many`` as shipped (it
records each item's attempt in the same statement) against the same statement without the
insert (``bench/sql/complete_many_bare.sql``, the statement before attempts were recorded),
alternating batch by batch in one process on one database, so drift on a shared machine falls
on both.

    .venv/bin/python bench/settle_cost.py [--batches 400] [--batch 100] [--database-url URL]

Each round claims ``--batch`` items (one claim statement) and completes them with one of the
two statements, timed alone (one round trip each). Without ``--database-url`` it uses the
embedded server in ``.pgdata/`` (``python -m project.embedded start`` first), in a fresh
database. Prints min / median / p90 per statement (ms per batch and per item) and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench" / "systems")]
DBNAME = "bench_settle_cost"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    import ours

    dsn = ours.fresh_database(args.database_url, DBNAME)

    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    ours.fill(ctx, args.batches * args.batch)

    from tenancy.contexts import AppType, new_request_context
    from workqueue import runtime
    from workqueue.claim import claim
    from workqueue.fence import Fences
    from workqueue.settle import COMPLETE_MANY
    from wqcore.statements import Statement
    from wqcore.store import System, execute

    bare = Statement("complete_many_bare", Fences, REPO / "bench" / "sql")
    rctx = new_request_context(AppType.WORKER)
    times: dict[str, list[float]] = {"with attempts": [], "bare": []}
    statements = {"with attempts": COMPLETE_MANY, "bare": bare}
    for round_ in range(args.batches):
        name = ("with attempts", "bare")[round_ % 2]
        claimed = claim(rctx, "default", [ours.KIND], "bench-host:1:abcdef", 30, args.batch)
        fences = Fences.of([runtime.Fence.of(item) for _, item in claimed])
        statement = statements[name]
        # The fences, and None for what a statement takes besides (complete_many's results).
        params = statement.params(*fences, *[None] * (len(statement.params._fields) - 3))
        started = time.perf_counter()
        rows = execute(System(statement, params))
        times[name].append((time.perf_counter() - started) * 1000)
        assert len(rows.rows) == len(claimed), (name, len(rows.rows), len(claimed))
    for name, ms in times.items():
        ms = ms[2:]  # the first runs of each prepare the statement
        ms.sort()
        p90 = ms[int(len(ms) * 0.9)]
        print(
            f"{name:>14}: min {ms[0]:.2f}  median {statistics.median(ms):.2f}  p90 {p90:.2f} ms"
            f" per batch of {args.batch} ({statistics.median(ms) / args.batch * 1000:.0f} us"
            " per item)"
        )
    ratio = statistics.median(times["with attempts"][2:]) / statistics.median(times["bare"][2:])
    print(f"ratio of medians (with attempts / bare): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
