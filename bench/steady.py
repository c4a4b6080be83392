#!/usr/bin/env python3
"""Steady arrivals beside a long REPEATABLE READ reader: does the queue keep up?

    .venv/bin/python bench/steady.py [--rate 1000] [--minutes 4] [--reader | --no-reader]
                                     [--reader-after S] [--workers N]
                                     [--pause-at S [--pause-for S]]
                                     [--tree PATH ...] [--peer pgqueuer|procrastinate]
                                     [--peer-minutes M]
                                     [--database-url URL]

Each configuration runs in a fresh database (``bench_steady``) on the embedded server
(``EMBEDDED_PGDATA``, this tree's ``.pgdata`` by default) or the owner URL given, in a process of
its own: the product of a tree (this one unless ``--tree`` names others; each tree needs its
``.venv``), one ``manage.py runworker`` with the shipped defaults, or a peer under ``bench/.venv``,
which ``bench/run`` builds (``pgqueuer``: its QueueManager with the default batch of 10 and an
async no-op; ``procrastinate``: one worker, concurrency 1, its defaults, an async no-op; the
adapters of bench/systems/). Items arrive at ``--rate`` a second in lists of 50 every 50 ms (the
enqueuer catches up when late); with ``--reader`` (the default) one connection holds a
``REPEATABLE READ`` transaction open from ``--reader-after`` seconds into the arrivals (0: before
the first) to the end (it ran one SELECT: its snapshot holds the xmin horizon). ``--workers``
starts that many ``runworker`` processes for ours (the peers run one). The queue's settings come
from the environment as the reference site reads them (``ITEM_RETENTION_S=180
HISTORY_SPAN_S=60`` runs a day's retention in minutes).

Every 10 s one line: items arrived and done in those 10 s, pending (arrived, not yet done), the
p50/p99 latency of the items done in them (creation to completion, by the database's clock),
the dead tuples (``n_dead_tup``) and total size of the hot tables (partitions summed) and of
history (the done items moved out of the hot table, with their attempts), the first hot table's
live rows (the statistics' estimate), history's tables, the database's size, and the sessions
seen waiting on a lock (heavyweight or lightweight, sampled every 250 ms: the mean per sample,
and the wait seen most). At the end, per configuration: the first and last minute's p50/p99,
done/arrived over the run, the largest pending, and whether it fell behind (more than 5 s of
arrivals pending at the end, or the last minute's completions 3% short of its arrivals); then
each configuration's figures against the peer's. The figures are written to
bench/out/steady-<time>.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DBNAME = "bench_steady"
LIST_SIZE = 50
TICK_S = 10.0
# Fell behind: more than this many seconds of arrivals still pending at the end, or the last
# minute's completions short of its arrivals by more than this share.
BEHIND_S = 5.0
BEHIND_SHARE = 0.03
RESULT = "STEADY:RESULT "


# The pseudo-table of a tree whose done items move to history (workqueue/history.py): the
# inheritance children of the item table and of the tables that follow an item, summed.
HISTORY = "history"


@dataclass(frozen=True)
class Tables:
    """How a system's figures are read: its hot tables, and the statement giving the items done
    in a window ``(%(since)s, %(until)s]``: their count and latency p50/p99 in seconds."""

    hot: tuple[str, ...]
    done_sql: str


OURS = Tables(
    ("workqueue_workitem", "workqueue_ready", "workqueue_attempt", HISTORY),
    """
    SELECT count(*),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM updated_at - created_at)),
           percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM updated_at - created_at))
      FROM workqueue_workitem
     WHERE status = 'done' AND updated_at > %(since)s AND updated_at <= %(until)s
    """,
)
# pgqueuer deletes a finished job from its queue and logs it; the log also holds its 'queued'
# row, written by the enqueue.
PGQUEUER = Tables(
    ("pgqueuer", "pgqueuer_log"),
    """
    SELECT count(*),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.created - q.created)),
           percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.created - q.created))
      FROM pgqueuer_log d
      JOIN pgqueuer_log q ON q.job_id = d.job_id AND q.status = 'queued'
     WHERE d.status = 'successful' AND d.created > %(since)s AND d.created <= %(until)s
    """,
)

# procrastinate keeps a finished job (delete_jobs "never", its default) and writes an event at
# each step: a job's wait is its 'succeeded' event less its 'deferred' one.
PROCRASTINATE = Tables(
    ("procrastinate_jobs", "procrastinate_events"),
    """
    SELECT count(*),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM s.at - d.at)),
           percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM s.at - d.at))
      FROM procrastinate_events s
      JOIN procrastinate_events d ON d.job_id = s.job_id AND d.type = 'deferred'
     WHERE s.type = 'succeeded' AND s.at > %(since)s AND s.at <= %(until)s
    """,
)

HOT_SQL = """
WITH t AS (SELECT to_regclass(%s) AS rel),
     tree AS (SELECT rel AS relid FROM t WHERE rel IS NOT NULL
              UNION SELECT p.relid FROM t, pg_partition_tree(t.rel) p)
SELECT count(tree.relid), coalesce(sum(s.n_dead_tup), 0),
       coalesce(sum(pg_total_relation_size(tree.relid)), 0), coalesce(sum(s.n_live_tup), 0)
  FROM tree LEFT JOIN pg_stat_user_tables s ON s.relid = tree.relid
"""

HISTORY_SQL = """
SELECT count(i.inhrelid), coalesce(sum(s.n_dead_tup), 0),
       coalesce(sum(pg_total_relation_size(i.inhrelid)), 0), coalesce(sum(s.n_live_tup), 0)
  FROM pg_inherits i LEFT JOIN pg_stat_user_tables s ON s.relid = i.inhrelid
 WHERE i.inhparent IN (SELECT to_regclass(t) FROM unnest(ARRAY['workqueue_workitem',
                       'workqueue_attempt', 'workqueue_tasks_taskrecord']) AS t)
"""


# The sessions of this database (not the monitor's) waiting on a lock: heavyweight locks and
# the lightweight ones (a MultiXact SLRU pile-up shows as LWLock waits).
WAITS_SQL = """
SELECT wait_event_type || ':' || wait_event
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND wait_event_type IN ('Lock', 'LWLock')
"""


# -- one configuration, in its own process -------------------------------------------------


class WaitSampler(threading.Thread):
    """Every 250 ms, on a connection of its own, counts the sessions waiting on a lock; each
    tick takes the mean per sample and the wait seen most since the last."""

    INTERVAL_S = 0.25

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.samples = 0
        self.waits: Counter[str] = Counter()

    def run(self) -> None:
        while not self.stop_event.wait(self.INTERVAL_S):
            rows = self.conn.execute(WAITS_SQL).fetchall()
            with self.lock:
                self.samples += 1
                self.waits.update(r[0] for r in rows)

    def take(self) -> tuple[float, str, dict[str, int]]:
        """The mean waiting sessions per sample since the last take, the wait seen most, all."""
        with self.lock:
            samples, waits = self.samples, self.waits
            self.samples, self.waits = 0, Counter()
        mean = sum(waits.values()) / max(1, samples)
        top = waits.most_common(1)[0][0] if waits else "-"
        return mean, top, dict(waits)


class Monitor(threading.Thread):
    """Every 10 s, on a connection of its own (autocommit: it holds no snapshot between
    statements), reads what was done and the hot tables, and prints a line."""

    def __init__(self, dsn: str, tables: Tables, arrived: Callable[[], int]) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.tables = tables
        self.arrived = arrived
        self.waits = WaitSampler(dsn)
        self.waits.start()
        self.stop_event = threading.Event()
        self.ticks: list[dict[str, Any]] = []
        self.since = self.now()
        self.started = self.since
        self.done_total = 0
        self.arrived_before = 0

    def now(self) -> Any:
        row = self.conn.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None
        return row[0]

    def window(self, since: Any, until: Any) -> tuple[int, float, float]:
        row = self.conn.execute(self.tables.done_sql, {"since": since, "until": until}).fetchone()
        assert row is not None
        count, p50, p99 = row
        return int(count), float(p50 or "nan") * 1000, float(p99 or "nan") * 1000

    def hot(self) -> list[tuple[int, int, int, int] | None]:
        """Per hot table: its tables, dead tuples, bytes and live rows (None: it has none)."""
        out: list[tuple[int, int, int, int] | None] = []
        for table in self.tables.hot:
            if table == HISTORY:
                row = self.conn.execute(HISTORY_SQL).fetchone()
            else:
                row = self.conn.execute(HOT_SQL, [table]).fetchone()
            assert row is not None
            out.append((int(row[0]), int(row[1]), int(row[2]), int(row[3])) if row[0] else None)
        return out

    def database_bytes(self) -> int:
        row = self.conn.execute("SELECT pg_database_size(current_database())").fetchone()
        assert row is not None
        return int(row[0])

    def header(self) -> str:
        dead = " ".join(f"{'dead ' + t.split('_')[-1]:>12}" for t in self.tables.hot)
        size = " ".join(f"{'MB ' + t.split('_')[-1]:>10}" for t in self.tables.hot)
        return (
            f"{'t s':>5} {'arrived':>8} {'done':>8} {'pending':>8} {'p50 ms':>9} {'p99 ms':>9} "
            f"{dead} {size} {'hot rows':>10} {'hist tbl':>8} {'db MB':>8} {'lock waits':>10} "
            "most waited"
        )

    def tick(self) -> dict[str, Any]:
        until = self.now()
        arrived = self.arrived()
        done, p50, p99 = self.window(self.since, until)
        self.done_total += done
        hot = self.hot()
        history = hot[-1] if HISTORY in self.tables.hot else None
        wait_mean, wait_top, waits = self.waits.take()
        row = {
            "t": (until - self.started).total_seconds(),
            "arrived": arrived - self.arrived_before,
            "done": done,
            "pending": arrived - self.done_total,
            "p50_ms": p50,
            "p99_ms": p99,
            "dead": [h[1] if h else None for h in hot],
            "bytes": [h[2] if h else None for h in hot],
            "hot_rows": hot[0][3] if hot[0] else None,
            "history_tables": history[0] if history else 0,
            "database_bytes": self.database_bytes(),
            "lock_waits_mean": wait_mean,
            "lock_waits": waits,
        }
        self.since, self.arrived_before = until, arrived
        self.ticks.append(row)
        dead = " ".join(f"{'-' if d is None else f'{d:,}':>12}" for d in row["dead"])
        size = " ".join(f"{'-' if b is None else f'{b / 1e6:.1f}':>10}" for b in row["bytes"])
        rows = "-" if row["hot_rows"] is None else f"{row['hot_rows']:,}"
        print(
            f"{row['t']:>5.0f} {row['arrived']:>8,} {done:>8,} {row['pending']:>8,} "
            f"{p50:>9.1f} {p99:>9.1f} {dead} {size} {rows:>10} {row['history_tables']:>8} "
            f"{row['database_bytes'] / 1e6:>8.1f} {wait_mean:>10.2f} {wait_top}",
            flush=True,
        )
        return row

    def run(self) -> None:
        next_at = time.monotonic() + TICK_S
        while not self.stop_event.wait(max(0.0, next_at - time.monotonic())):
            self.tick()
            next_at += TICK_S


def hold_reader(dsn: str) -> Any:
    """A connection in a REPEATABLE READ transaction that ran one SELECT: its snapshot, and so
    the server's xmin horizon, stays until it closes."""
    import psycopg

    conn = psycopg.connect(dsn)
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT count(*) FROM pg_class").fetchone()
    return conn


def arrive(
    dsn: str,
    tables: Tables,
    enqueue: Callable[[int], None],
    args: argparse.Namespace,
    at: Callable[[float], None] = lambda elapsed_s: None,
) -> dict[str, Any]:
    """Enqueue ``rate`` items a second in lists of 50 for ``minutes``, the reader held open
    beside it, a line every 10 s, ``at`` called with the seconds since the first list before
    each one; the run's figures."""
    interval = LIST_SIZE / args.rate
    count = [0]
    reader = hold_reader(dsn) if args.reader and not args.reader_after else None
    monitor = Monitor(dsn, tables, lambda: count[0])
    print(monitor.header(), flush=True)
    monitor.start()
    start = time.monotonic()
    end = start + args.minutes * 60
    next_at = start
    try:
        while (now := time.monotonic()) < end:
            if args.reader and reader is None and now >= start + args.reader_after:
                reader = hold_reader(dsn)
                print(f"-- the reader holds its snapshot from {now - start:.0f} s", flush=True)
            at(now - start)
            if now < next_at:
                time.sleep(next_at - now)
            enqueue(LIST_SIZE)
            count[0] += LIST_SIZE
            next_at += interval
        monitor.stop_event.set()
        monitor.join()
        monitor.tick()  # the part of a tick left at the end
        monitor.waits.stop_event.set()
        until = monitor.now()
        last_minute = monitor.window(until - _minute(), until)
        first_minute = monitor.window(monitor.started, monitor.started + _minute())
    finally:
        if reader is not None:
            reader.close()
    ticks = monitor.ticks
    arrived = count[0]
    return {
        "ticks": ticks,
        "arrived": arrived,
        "done": monitor.done_total,
        "max_pending": max(t["pending"] for t in ticks),
        "final_pending": ticks[-1]["pending"],
        "last_minute_done": last_minute[0],
        "last_minute_p50_ms": last_minute[1],
        "last_minute_p99_ms": last_minute[2],
        "last_minute_arrived": sum(t["arrived"] for t in ticks if t["t"] > ticks[-1]["t"] - 60),
        "first_minute_p50_ms": first_minute[1],
        "first_minute_p99_ms": first_minute[2],
        "max_hot_rows": max(t["hot_rows"] or 0 for t in ticks),
        "max_database_mb": max(t["database_bytes"] for t in ticks) / 1e6,
        "max_lock_waits_mean": max(t["lock_waits_mean"] for t in ticks),
        # The first hot table's size at the end (the items' table, the peer's queue), and
        # history's where the tree has one.
        "hot_mb_end": (ticks[-1]["bytes"][0] or 0) / 1e6,
        "history_mb_end": ((ticks[-1]["bytes"][-1] or 0) / 1e6 if HISTORY in tables.hot else None),
    }


def _minute() -> Any:
    from datetime import timedelta

    return timedelta(minutes=1)


def run_ours(dsn: str, tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    sys.path[:0] = [str(tree), str(tree / "bench" / "systems")]
    import ours

    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    from workqueue.runtime import NewItem, enqueue_many

    seq = [0]

    def enqueue(n: int) -> None:
        enqueue_many(ctx, [NewItem(ours.KIND, {"seq": seq[0] + i}) for i in range(n)])
        seq[0] += n

    workers = ours.RunWorkers("default", args.workers)
    try:
        return arrive(dsn, OURS, enqueue, args, lane_pause(args))
    finally:
        workers.stop()


def lane_pause(args: argparse.Namespace) -> Callable[[float], None]:
    """With ``--pause-at``: pause the workers' lane then, and resume it ``--pause-for`` seconds
    later (a backlog of that many seconds of arrivals, to be drained beside the reader)."""
    from workqueue.pauses import pause, resume

    state = {"paused": False, "resumed": args.pause_at is None}

    def at(elapsed_s: float) -> None:
        if state["resumed"] or elapsed_s < args.pause_at:
            return
        if not state["paused"]:
            pause("bench", "default", reason="bench/steady.py --pause-at")
            state["paused"] = True
            print(f"-- the lane is paused from {elapsed_s:.0f} s", flush=True)
        elif elapsed_s >= args.pause_at + args.pause_for:
            resume("bench", "default")
            state["resumed"] = True
            print(f"-- the lane is resumed at {elapsed_s:.0f} s", flush=True)

    return at


def run_pgqueuer(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    import asyncio

    adapter = _adapter("pgqueuer")
    common = adapter.c
    loop = asyncio.new_event_loop()
    loop.run_until_complete(adapter.setup(dsn))
    queries = loop.run_until_complete(adapter.queries(dsn))
    seq = [0]

    def enqueue(n: int) -> None:
        payloads = [adapter.payload(seq[0] + i) for i in range(n)]
        loop.run_until_complete(queries.enqueue([adapter.ENTRYPOINT] * n, payloads, [0] * n))
        seq[0] += n

    with common.Workers(_adapter_path("pgqueuer"), ["serve", "--dsn", dsn], 1) as workers:
        workers.wait_ready()
        workers.go()
        return arrive(dsn, PGQUEUER, enqueue, args)


def run_procrastinate(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    import asyncio

    adapter = _adapter("procrastinate")
    common = adapter.c
    loop = asyncio.new_event_loop()
    loop.run_until_complete(adapter.setup(dsn))
    app, noop = adapter.make_app(dsn)
    loop.run_until_complete(app.connector.open_async())
    seq = [0]

    def enqueue(n: int) -> None:
        jobs = ({"seq": seq[0] + i} for i in range(n))
        loop.run_until_complete(noop.batch_defer_async(*jobs))
        seq[0] += n

    try:
        with common.Workers(_adapter_path("procrastinate"), ["serve", "--dsn", dsn], 1) as workers:
            workers.wait_ready()
            workers.go()
            return arrive(dsn, PROCRASTINATE, enqueue, args)
    finally:
        loop.run_until_complete(app.connector.close_async())


def _adapter_path(name: str) -> str:
    return str(BENCH / "systems" / f"{name}.py")


def _adapter(name: str) -> Any:
    """A peer's adapter (bench/systems/<name>.py), loaded under another name: each is named
    after the library it drives."""
    spec = importlib.util.spec_from_file_location(f"{name}_adapter", _adapter_path(name))
    assert spec is not None and spec.loader is not None
    adapter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(adapter)
    return adapter


# -- the harness ---------------------------------------------------------------------------


@dataclass
class Config:
    name: str
    python: Path
    args: list[str]
    cwd: Path
    minutes: float


def admin_url(given: str | None) -> str:
    sys.path[:0] = [str(REPO), str(BENCH / "systems")]
    import _pg

    if given:
        return given
    from project.database import embedded_urls
    from project.embedded import default_pgdata, is_running, start

    pgdata = default_pgdata()
    if not is_running(pgdata):
        start(pgdata)
    return _pg.database_url(embedded_urls(pgdata).admin, "postgres")


def configs(args: argparse.Namespace) -> list[Config]:
    out = []
    for tree in args.tree or [REPO]:
        tree = tree.resolve()
        rev = subprocess.run(
            ["git", "-C", str(tree), "log", "-1", "--format=%h"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        name = f"ours {tree.name}@{rev}"
        out.append(Config(name, tree / ".venv/bin/python", ["ours", str(tree)], tree, args.minutes))
    for peer in args.peer:
        minutes = args.peer_minutes or args.minutes
        out.append(Config(peer, BENCH / ".venv/bin/python", [peer, ""], REPO, minutes))
    return out


def run_config(config: Config, url: str, args: argparse.Namespace) -> dict[str, Any]:
    sys.path[:0] = [str(BENCH / "systems")]
    import _pg

    dsn = _pg.fresh_database(url, DBNAME)
    cmd = [
        str(config.python),
        __file__,
        "--child",
        *config.args,
        dsn,
        "--rate",
        str(args.rate),
        "--minutes",
        str(config.minutes),
        "--reader" if args.reader else "--no-reader",
        "--reader-after",
        str(args.reader_after),
        "--workers",
        str(args.workers),
        *(["--pause-at", str(args.pause_at)] if args.pause_at is not None else []),
        "--pause-for",
        str(args.pause_for),
    ]
    proc = subprocess.Popen(cmd, cwd=config.cwd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    result: dict[str, Any] | None = None
    for line in proc.stdout:
        if line.startswith(RESULT):
            result = json.loads(line[len(RESULT) :])
        else:
            print(line, end="", flush=True)
    if proc.wait() != 0 or result is None:
        raise SystemExit(f"{config.name}: exited {proc.returncode}")
    _pg.drop_database(url, DBNAME)
    return result


def fell_behind(result: dict[str, Any], rate: int) -> bool:
    short = result["last_minute_done"] < (1 - BEHIND_SHARE) * result["last_minute_arrived"]
    return bool(short or result["final_pending"] > rate * BEHIND_S)


def summary(results: dict[str, dict[str, Any]], args: argparse.Namespace, label: str) -> None:
    reader = f"with reader from {args.reader_after:g} s" if args.reader else "without reader"
    print(f"\n== steady {args.rate:,}/s, {reader}, {args.workers} worker(s) of ours; {label} ==")
    print(
        f"{'configuration':<24} {'min':>4} {'1st-min p50/p99 ms':>19} {'last-min p50/p99 ms':>20} "
        f"{'p99 last/1st':>12} {'done/arrived':>12} {'max pending':>11} {'fell behind':>11} "
        f"{'hot MB':>8} {'history MB':>10} {'max db MB':>9} {'lock waits':>10}"
    )
    for name, r in results.items():
        first = f"{r['first_minute_p50_ms']:.1f}/{r['first_minute_p99_ms']:.1f}"
        last = f"{r['last_minute_p50_ms']:.1f}/{r['last_minute_p99_ms']:.1f}"
        growth = r["last_minute_p99_ms"] / r["first_minute_p99_ms"]
        print(
            f"{name:<24} {r['minutes']:>4g} {first:>19} {last:>20} {growth:>11.2f}x "
            f"{r['done'] / max(1, r['arrived']):>12.3f} "
            f"{r['max_pending']:>11,} {'yes' if fell_behind(r, args.rate) else 'no':>11} "
            f"{r.get('hot_mb_end', 0):>8.1f} "
            f"{'-' if r.get('history_mb_end') is None else f'{r["history_mb_end"]:.1f}':>10} "
            f"{r['max_database_mb']:>9.1f} {r['max_lock_waits_mean']:>10.2f}"
        )
    peers = [n for n in results if not n.startswith("ours")]
    for peer in peers:
        p = results[peer]
        print(f"\nratios against {peer} (lower is better for latency, higher for done/arrived)")
        for name, r in results.items():
            if name in peers:
                continue
            ratio50 = r["last_minute_p50_ms"] / p["last_minute_p50_ms"]
            ratio99 = r["last_minute_p99_ms"] / p["last_minute_p99_ms"]
            done = (r["done"] / max(1, r["arrived"])) / (p["done"] / max(1, p["arrived"]))
            print(
                f"  {name:<24} last-min p50 {ratio50:.3g}x  p99 {ratio99:.3g}x  "
                f"done/arrived {done:.3g}x"
            )


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    doc = __doc__ or ""
    p = argparse.ArgumentParser(
        prog="bench/steady.py",
        description=doc.split("\n\n", 2)[-1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rate", type=int, default=1000, help="items a second (default: %(default)s)")
    p.add_argument(
        "--minutes", type=float, default=4, help="each configuration's run (default: %(default)s)"
    )
    p.add_argument(
        "--reader",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hold a REPEATABLE READ transaction open beside the run (default: on)",
    )
    p.add_argument(
        "--reader-after",
        type=float,
        default=0.0,
        help="open the reader this many seconds into the arrivals (default: %(default)s, before "
        "the first)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="runworker processes of ours (default: %(default)s; the peers run one)",
    )
    p.add_argument(
        "--pause-at",
        type=float,
        help="pause the workers' lane this many seconds into the arrivals (ours only): a "
        "backlog builds, and the run shows whether it drains beside the reader",
    )
    p.add_argument(
        "--pause-for",
        type=float,
        default=30.0,
        help="how long the lane stays paused (default: %(default)s)",
    )
    p.add_argument(
        "--tree",
        type=Path,
        action="append",
        default=[],
        help="run the product from this git worktree (with its .venv); repeatable "
        "(default: this tree)",
    )
    p.add_argument(
        "--peer",
        action="append",
        default=[],
        choices=["pgqueuer", "procrastinate"],
        help="run a peer under the same load and reader, after the trees",
    )
    p.add_argument("--peer-minutes", type=float, help="the peer's run (default: --minutes)")
    p.add_argument("--trees-off", action="store_true", help="run the peers only")
    p.add_argument(
        "--label",
        default="shared 2-core machine, other sessions running (noisy)",
        help="what the summary says of the machine (default: %(default)s)",
    )
    p.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rate < LIST_SIZE or args.minutes <= 0:
        p.error(f"--rate must be at least {LIST_SIZE} and --minutes above 0")
    if args.workers < 1 or args.reader_after < 0:
        p.error("--workers must be at least 1 and --reader-after at least 0")
    if args.pause_at is not None and (args.peer or args.pause_at < 0 or args.pause_for <= 0):
        p.error("--pause-at runs ours only (no --peer), at 0 or later, for --pause-for above 0")
    return args


def main() -> int:
    args = parse_cli()
    if args.child:
        system, tree, dsn = args.child
        if system == "ours":
            result = run_ours(dsn, Path(tree), args)
        elif system == "procrastinate":
            result = run_procrastinate(dsn, args)
        else:
            result = run_pgqueuer(dsn, args)
        print(RESULT + json.dumps({**result, "minutes": args.minutes}), flush=True)
        return 0
    url = admin_url(args.database_url)
    results: dict[str, dict[str, Any]] = {}
    for config in configs(args):
        if args.trees_off and config.name.startswith("ours"):
            continue
        started = time.strftime("%H:%M:%S", time.gmtime())
        print(f"\n-- {config.name}, {config.minutes:g} min, started {started} UTC", flush=True)
        results[config.name] = run_config(config, url, args)
    summary(results, args, args.label)
    out = BENCH / "out" / f"steady-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"argv": sys.argv[1:], "label": args.label, "results": results}))
    print(f"\nwrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
