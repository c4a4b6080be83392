#!/usr/bin/env python3
"""Where a bulk enqueue's time goes: ``enqueue_many`` of fresh items, against its two parts
measured alone, alternating batch by batch in one process on one fresh database.

    .venv/bin/python bench/enqueue_split.py [--batches 40] [--batch 1000] [--database-url URL]

- ``enqueue_many``: the whole call (validation and the rows' arrays overlapped with the
  server's inserts, chunk by chunk in one pipeline and one transaction);
- ``python``: validating the batch and writing its chunks' parameters, no statement sent;
- ``server``: the same chunks' statements with their parameters made beforehand, in one
  pipeline and one transaction: the server's part and the round trips.

Each round runs the three in a shuffled order (what runs right after another batch pays for its
leftovers). Prints the median ms per batch and items/s of each. Without ``--database-url`` it
uses the PostgreSQL at 127.0.0.1:5432 as ``postgres``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench" / "systems")]
DBNAME = "bench_enqueue_split"
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--database-url", default=DEFAULT_URL, help="an owner URL")
    args = parser.parse_args()
    import _pg
    import ours
    import psycopg

    dsn = _pg.fresh_database(args.database_url, DBNAME)
    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    ours.settle(dsn)

    from workqueue import columns
    from workqueue import enqueue_many as bulk
    from workqueue.runtime import NewItem, enqueue_many

    author = columns.Author.of(ctx)
    statement = bulk.ENQUEUE_MANY_NEW
    app = psycopg.connect(ours._as(dsn, "workqueue_app"), cursor_factory=psycopg.RawCursor)

    def items() -> list[NewItem]:
        return [NewItem(ours.KIND, {"seq": i}) for i in range(args.batch)]

    def chunk_params(batch: list[NewItem]) -> list[tuple[Any, ...]]:
        params = []
        for start, end in bulk.chunk_bounds(len(batch)):
            rows = bulk._rows(batch[start:end], first=start)
            params.append(statement.bind_native(columns.many_params(author, rows)))
        return params

    def server(sql: str) -> Callable[[], float]:
        def run() -> float:
            params = chunk_params(items())
            started = time.perf_counter()
            with app.transaction(), app.pipeline():
                for bound in params:
                    app.execute(sql, bound, prepare=True)
            return time.perf_counter() - started

        return run

    def python_only() -> float:
        batch = items()
        started = time.perf_counter()
        chunk_params(batch)
        return time.perf_counter() - started

    def whole() -> float:
        batch = items()
        started = time.perf_counter()
        enqueue_many(ctx, batch)
        return time.perf_counter() - started

    parts: dict[str, Callable[[], float]] = {
        "enqueue_many": whole,
        "python": python_only,
        "server": server(statement.native_sql),
    }
    for run in parts.values():  # warm: prepared statements, caches
        run()
    times: dict[str, list[float]] = {name: [] for name in parts}
    # Each round in a shuffled order: what runs right after another batch pays for its
    # leftovers (dirty buffers, the WAL writer), so no part may always come first or last.
    order = random.Random(22)
    for _ in range(args.batches):
        names = list(parts)
        order.shuffle(names)
        for name in names:
            times[name].append(parts[name]())
    app.close()
    print(f"\nbatches of {args.batch:,} fresh items, medians of {args.batches}")
    print("| part | ms per batch | items/s |\n|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median * 1000:.2f} | {args.batch / median:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
