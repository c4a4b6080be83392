#!/usr/bin/env python3
"""What rate limits cost the claim: the claim of one item and the drain (claims of 100) with
limits set, none binding, against the same claims without limits.

    .venv/bin/python bench/rate_limits.py [--items 20000] [--n 300] [--rounds 3]
                                          [--configs one,kind,thousand,elsewhere]
                                          [--against CHECKOUT] [--database-url URL]

Each config runs in a fresh database (``bench_rate_limits``) on the embedded server in
``.pgdata/`` (``EMBEDDED_PGDATA``; ``python -m project.embedded start`` first) or the owner URL
given, in a process of its own. Items carry one of 1,000 rate keys, and every limit set allows
1,000,000/s (never binding): ``one`` limits one key (one item in 1,000 counted); ``kind`` limits
the items' kind (every item counted, a claim of 100 spends one bucket); ``thousand`` limits each
of the 1,000 keys apart (1,000 limit rows; a claim of 100 spends 100 buckets); ``elsewhere``
sets 1,000 limits on keys no item carries (none counted). Within a config the claims alternate
one by one between the claim with the limits' parts (what runs while any limit is set) and the
claim without them (what runs while none is set: it reads no limit), on the same items: the
machine's drift falls on both, and the ratio is the limits' cost. ``claim ms``: the medians of
``--n`` claims of one item each way (each completed); ``drain``: claims of 100 until the lane is
empty, each batch marked done by one statement outside the timing, the median time of each way's
claims compared (``x none``: with limits / without). The figure the issue sets: the drain within
1.1x.

``--against`` another checkout (e.g. an export of the main branch, with its own ``.venv``
link): each round runs every config with this file on that checkout's code too, alternating.
The machine is shared: read the spread over the rounds, not one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
CONFIGS = ("one", "kind", "thousand", "elsewhere")
KEYS = 1000
DBNAME = "bench_rate_limits"


class Result(NamedTuple):
    # The medians of the claims of one item, with the limits' parts and without.
    claim_ms: float
    claim_none_ms: float
    # The drain's items/s with the limits' parts, and its claims' median time over the
    # median of those without.
    drain: float
    drain_ratio: float
    # The same claims' CPU (the worker's thread and its server process) over those without.
    cpu_ratio: float


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
    from ours import KIND

    from workqueue.rate_limits import set_rate_limit

    if config == "kind":
        set_rate_limit("bench", "kind", KIND, "1000000/s")
        return
    keys = {"one": range(1), "thousand": range(KEYS), "elsewhere": range(KEYS, 2 * KEYS)}[config]
    for k in keys:
        set_rate_limit("bench", "key", f"acct-{k}", "1000000/s")


def _limited(on: bool) -> None:
    """The next claims run with the limits' parts (``on``) or without, whatever is set: the
    claim's own reading of whether a limit is set, held."""
    from workqueue import claim

    claim._rate_limits.update(set=on, read_at=float("inf"))


def _claims(n: int) -> tuple[float, float]:
    from ours import KIND

    from tenancy.contexts import AppType, new_request_context
    from workqueue.claim import claim
    from workqueue.settle import complete

    rctx = new_request_context(AppType.WORKER)
    took: dict[bool, list[float]] = {True: [], False: []}
    for i in range(2 * n):
        on = i % 2 == 0
        _limited(on)
        t0 = time.perf_counter()
        [(item_ctx, item)] = claim(rctx, "default", [KIND], "bench", 30, 1)
        took[on].append((time.perf_counter() - t0) * 1000)
        complete(item_ctx, item)
    return statistics.median(took[True]), statistics.median(took[False])


def _server_cpu_ns(pid: int) -> int:
    """The CPU time the server's process ``pid`` has run, in ns (Linux's schedstat)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def _drain() -> tuple[float, float, float]:
    from django.db import connections
    from ours import KIND

    from tenancy.contexts import AppType, new_request_context
    from workqueue.claim import claim
    from wqcore.conf import system_alias

    rctx = new_request_context(AppType.WORKER)
    with connections[system_alias()].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    items, spent = 0, 0.0
    # Each way's claims of a full batch: their median time (a hiccup of the machine moves it
    # less than it moves a sum), and the CPU they cost, the worker's and the server's (what
    # the other sessions of a shared machine move least).
    took: dict[bool, list[float]] = {True: [], False: []}
    cpu = {True: 0, False: 0}
    on = True
    while True:
        _limited(on)
        c0, t0 = _server_cpu_ns(backend) + time.thread_time_ns(), time.perf_counter()
        got = claim(rctx, "default", [KIND], "bench", 30, 100)
        took_s = time.perf_counter() - t0
        if not got:
            break
        if on:
            items, spent = items + len(got), spent + took_s
        if len(got) == 100:
            took[on].append(took_s)
            cpu[on] += _server_cpu_ns(backend) + time.thread_time_ns() - c0
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "UPDATE workqueue_workitem SET status = 'done' WHERE id = ANY(%s)",
                [[item.id for _ctx, item in got]],
            )
        on = not on
    n = {way: len(took[way]) for way in took}
    return (
        items / spent,
        statistics.median(took[True]) / statistics.median(took[False]),
        (cpu[True] / n[True]) / (cpu[False] / n[False]),
    )


def _run(dsn: str, config: str, items: int, n: int) -> Result:
    import ours

    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    _limit(config)
    _fill(ctx, items)
    return Result(*_claims(n), *_drain())


def _one(code: Path, admin_url: str, config: str, items: int, n: int) -> Result:
    """One config in a fresh database, in a process of its own, on ``code`` (a checkout)."""
    import subprocess

    dsn = _fresh(admin_url)
    args = ["--config", config, "--database-url", dsn, "--items", str(items), "--n", str(n)]
    out = subprocess.run(
        [sys.executable, __file__, "--code", str(code), *args],
        cwd=code,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return Result(*(float(v) for v in out[-5:]))


def _spread(values: list[float]) -> str:
    """median (min-max)"""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help="which limits to set, comma-separated"
    )
    parser.add_argument("--against", type=Path, help="another checkout, run alternately")
    parser.add_argument("--config", choices=CONFIGS, help=argparse.SUPPRESS)
    parser.add_argument("--code", type=Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    if args.config:  # one config, in this process (Django is set up once per process)
        code = args.code.resolve()
        sys.path[:0] = [str(code), str(code / "bench" / "systems")]
        result = _run(args.database_url, args.config, args.items, args.n)
        print(" ".join(f"{v:.4f}" for v in result))
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
    # A round runs every config on every checkout once, the order turned each round.
    runs: dict[tuple[str, str], list[Result]] = {}
    configs = [c for c in args.configs.split(",") if c]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown --configs {','.join(unknown)}: choose from {','.join(CONFIGS)}")
    order = [(name, config) for config in configs for name in checkouts]
    for r in range(args.rounds):
        for name, config in order if r % 2 == 0 else order[::-1]:
            result = _one(checkouts[name], admin_url, config, args.items, args.n)
            runs.setdefault((name, config), []).append(result)
            print(
                f"round {r + 1} {name:<7} {config:<9} claim {result.claim_ms:.3f} ms"
                f" (none {result.claim_none_ms:.3f})  drain {result.drain:.0f}/s"
                f" ({result.drain_ratio:.3f}x none, cpu {result.cpu_ratio:.3f}x)",
                flush=True,
            )
    print(
        f"\n{'checkout':<8} {'limits':<9} {'claim ms':>19} {'x none':>19}"
        f" {'drain items/s':>22} {'x none':>19} {'cpu x none':>19}"
    )
    for name, config in order:
        rs = runs[(name, config)]
        drains = [r.drain for r in rs]
        print(
            f"{name:<8} {config:<9} {_spread([r.claim_ms for r in rs]):>19}"
            f" {_spread([r.claim_ms / r.claim_none_ms for r in rs]):>19}"
            f" {statistics.median(drains):>7.0f} ({min(drains):.0f}-{max(drains):.0f})"
            f" {_spread([r.drain_ratio for r in rs]):>19}"
            f" {_spread([r.cpu_ratio for r in rs]):>19}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
