#!/usr/bin/env python3
"""What the fast rescue's look costs the server: ``find_gone_holders`` against fleets of 1 to
1,000 live workers, each with its row and its liveness lock held (beside other advisory locks a
site may hold, and claimed items in the table).

    .venv/bin/python bench/rescue_cost.py [--fleets 1,10,100,300,1000] [--runs 200]
        [--database-url URL]

Every sweeping worker's timer asks for the look each ``SWEEP_RESCUE_INTERVAL_S`` (0.5 s by
default) times fleet / 4 (at least 1, at most 8: ``workers.sweep.rescue.ask_delay_s``); the
timers take turns (``RescueTurn``), so at most one look is taken each 0.8 interval and every
other ask is refused at the turn. For each fleet: the look's round trip (median and
p90, ms), its execution on the server and a refused ask's (EXPLAIN ANALYZE, medians), then the
share of one server core the whole fleet's asks take, as shipped and as it would be if each
timer looked every interval (fleet x 2 looks a second). The locks are held by a few sessions of
this process (a lock is a row of pg_locks, whoever holds it). Without ``--database-url`` it uses
the embedded server in ``.pgdata/`` (``python -m project.embedded start`` first), in a fresh
database.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench" / "systems")]
DBNAME = "bench_rescue_cost"
INTERVAL_S = 0.5  # SWEEP_RESCUE_INTERVAL_S's default
LOCKS_PER_SESSION = 100
OTHER_LOCKS = 200  # a site's own advisory locks, on other keys
CLAIMED_PER_WORKER = 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", default="1,10,100,300,1000")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    import ours
    import psycopg

    dsn = ours.fresh_database(args.database_url, DBNAME)

    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    ours.fill(ctx, max(int(f) for f in args.fleets.split(",")) * CLAIMED_PER_WORKER)

    from workers.sweep.rescue import ASKS, FIND_GONE_HOLDERS, MAX_SPREAD, TURN_SHARE, FindParams
    from wqcore.store import System, execute

    sql = (FIND_GONE_HOLDERS.directory / "find_gone_holders.sql").read_text().strip()
    header = ("workers", "look p50", "p90", "look", "refused ask", "load", "all look")
    print(" ".join(f"{h:>12}" for h in header))
    asks_per_s = 1 / INTERVAL_S
    looks_per_s = 1 / (INTERVAL_S * TURN_SHARE)
    with psycopg.connect(dsn, autocommit=True) as owner:
        for fleet in (int(f) for f in args.fleets.split(",")):
            holders = _hold(psycopg, dsn, owner, fleet)
            try:
                trips = []
                for _ in range(args.runs):
                    started = time.perf_counter()
                    execute(System(FIND_GONE_HOLDERS, FindParams(1.0, 0.0)))
                    trips.append((time.perf_counter() - started) * 1000)
                runs = max(20, args.runs // 10)
                look = statistics.median(_explained(owner, sql, 0.0) for _ in range(runs))
                _explained(owner, sql, 3600.0)  # takes the turn
                refused = statistics.median(_explained(owner, sql, 3600.0) for _ in range(runs))
            finally:
                for conn in holders:
                    conn.close()
            trips = sorted(trips[5:])
            p50, p90 = statistics.median(trips), trips[int(len(trips) * 0.9)]
            # Shares of a core: ms of work a second, over 1,000 ms.
            asks = fleet * asks_per_s / min(MAX_SPREAD, max(1.0, fleet / ASKS))
            looks = min(asks, looks_per_s)
            turns = looks * look + (asks - looks) * refused
            each = fleet * asks_per_s * look
            cells = (
                f"{p50:.3f} ms",
                f"{p90:.3f}",
                f"{look:.3f} ms",
                f"{refused:.3f} ms",
                f"{turns / 10:.2f} %",
                f"{each / 10:.2f} %",
            )
            print(f"{fleet:>12} " + " ".join(f"{c:>12}" for c in cells))
    return 0


def _hold(psycopg: object, dsn: str, owner: object, fleet: int) -> list:
    """``fleet`` workers' rows with their locks held, each holding claimed items, and the site's
    other locks; the sessions that hold them."""
    owner.execute("DELETE FROM workqueue_workers_worker")  # type: ignore[attr-defined]
    owner.execute(  # type: ignore[attr-defined]
        "INSERT INTO workqueue_workers_worker (id, kind, lane, host, pid, state, lock_key)"
        " SELECT 'bench:' || g || ':x', 'NOOP', 'default', 'bench', g, 'running', 1000000 + g"
        "   FROM generate_series(1, %s) g",
        [fleet],
    )
    owner.execute(  # type: ignore[attr-defined]
        "UPDATE workqueue_workitem SET status = 'pending', claimed_by = NULL"
    )
    owner.execute(  # type: ignore[attr-defined]
        "UPDATE workqueue_workitem w SET status = 'claimed', claimed_by = 'bench:' || n.g || ':x',"
        " claim_token = gen_random_uuid(), claimed_at = now(),"
        " lease_expires_at = now() + interval '1 hour'"
        " FROM (SELECT id, 1 + (row_number() OVER (ORDER BY id) - 1) / %s AS g"
        "         FROM workqueue_workitem) n"
        " WHERE w.id = n.id AND n.g <= %s",
        [CLAIMED_PER_WORKER, fleet],
    )
    keys = [1_000_000 + g for g in range(1, fleet + 1)] + [
        5_000_000 + g for g in range(OTHER_LOCKS)
    ]
    sessions = []
    for start in range(0, len(keys), LOCKS_PER_SESSION):
        conn = psycopg.connect(dsn, autocommit=True)  # type: ignore[attr-defined]
        conn.execute(
            "SELECT pg_advisory_lock(k) FROM unnest(%s::bigint[]) k",
            [keys[start : start + LOCKS_PER_SESSION]],
        )
        sessions.append(conn)
    return sessions


def _explained(owner: object, sql: str, turn_s: float) -> float:
    """The statement's execution on the server, ms, without its planning (the workers' asks
    run it prepared). It writes only the turn here: every lock is held."""
    plan = owner.execute(  # type: ignore[attr-defined]
        "EXPLAIN (ANALYZE, FORMAT JSON) " + sql, {"grace_s": 1.0, "turn_s": turn_s}
    ).fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Execution Time"])


if __name__ == "__main__":
    raise SystemExit(main())
