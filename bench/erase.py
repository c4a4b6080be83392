#!/usr/bin/env python3
"""Erasing a tenant while another drains: ``workqueue.api.erase`` of tenant A (``--items``
items: done ones moved to history with their attempts, dead letters with their attempts and
audit entries, pending ones, workflows, outbox rows) while one ``manage.py runworker`` (the
shipped defaults) drains tenant B's backlog.

    .venv/bin/python bench/erase.py [--items 100000] [--backlog 300000] [--batch 1000]
        [--pause-ms 0] [--before-s 10] [--database-url URL]

Prints A's rows table by table before and after (every table with an ``org_id``, history's
children and the ring's partitions each by itself; the audit trail as entries not yet
redacted), the erase's elapsed time, B's drain rate in the ``--before-s`` seconds before the
erase and during it, and how often (sampled every 20 ms) another session waited for a lock
while it ran. Without ``--database-url`` it uses the embedded server in
``.pgdata/`` in a fresh database (``bench_erase``).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench" / "systems")]
DBNAME = "bench_erase"
DAY_S = 86400.0


def _sql(statement: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    from django.db import connections

    with connections["admin"].cursor() as cursor:
        cursor.execute(statement, params or [])
        return cursor.fetchall() if cursor.description else []


def _rows_of(org_id: Any) -> dict[str, int]:
    """The tenant's rows in each table by itself (ONLY); the audit trail's not yet redacted."""
    tables = [
        r[0]
        for r in _sql(
            "SELECT c.table_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = current_schema() AND c.column_name = 'org_id'"
            " AND t.table_type = 'BASE TABLE' AND c.table_name <> 'workqueue_tenancy_membership'"
            " ORDER BY 1"
        )
    ]
    counts = {}
    for table in tables:
        redacted = " AND data <> '{\"redacted\": true}'" if table.endswith("auditentry") else ""
        sql = f"SELECT count(*) FROM ONLY {table} WHERE org_id = %s{redacted}"
        counts[table] = int(_sql(sql, [org_id])[0][0])
    counts["workqueue_ratelimit (tenant)"] = int(
        _sql("SELECT count(*) FROM workqueue_ratelimit WHERE target = %s", [str(org_id)])[0][0]
    )
    return counts


def _fill_a(ctx: Any, items: int) -> None:
    """A's rows: 60% done (moved to history), 20% dead letters (audited), 10% pending, the rest
    in workflows of 10 steps, none in a lane the worker claims (A's traffic is stopped, as the
    how-to asks); one attempt per ended item; an outbox row per 10 items (relayed: a pending one
    would become an item the worker runs); a stored response, a share, a minute, a rate
    limit."""
    import ours

    from workqueue import api, runtime

    done, dead = items * 6 // 10, items * 2 // 10
    flows = (items - done - dead - items // 10) // 10
    pending = items - done - dead - flows * 10
    org = ctx.org_id
    insert = """
        INSERT INTO workqueue_workitem (
            id, org_id, kind, lane, status, payload, priority, available_at, attempts,
            max_attempts, last_error, created_by, updated_by, created_at, updated_at)
        SELECT gen_random_uuid(), %s, %s, 'erase-a', %s, jsonb_build_object('seq', g), 0, now(),
               1, 5, %s, 'bench', 'bench', now() - interval '10 minutes',
               now() - interval '5 minutes'
          FROM generate_series(1, %s) AS g
    """
    _sql(insert, [org, ours.KIND, "done", "", done])
    _sql(insert, [org, ours.KIND, "failed", "PermanentError: bench", dead])
    _sql(insert, [org, ours.KIND, "pending", "", pending])
    _sql(
        "INSERT INTO workqueue_attempt (org_id, item_id, attempt, worker, host, started_at,"
        " ended_at, outcome, error, traceback) SELECT org_id, id, 1, 'w', 'h', created_at,"
        " updated_at, CASE status WHEN 'done' THEN 'done' ELSE 'dead_lettered' END, last_error,"
        " '' FROM workqueue_workitem WHERE org_id = %s AND status IN ('done', 'failed')",
        [org],
    )
    _sql(
        "INSERT INTO workqueue_audit_auditentry (id, org_id, actor, action, subject_type,"
        " subject_id, data, created_at) SELECT gen_random_uuid(), org_id, 'bench',"
        " 'work.dead_lettered', 'workqueue.workitem', id::text, jsonb_build_object('payload',"
        " payload, 'error', last_error), now() FROM workqueue_workitem WHERE org_id = %s"
        " AND status = 'failed'",
        [org],
    )
    for _ in range(flows):
        wf = api.Workflow()
        wf.chain(*(api.NewItem(ours.KIND, {"seq": i}, lane="erase-a-flow") for i in range(10)))
        api.enqueue_workflow(ctx, wf)
    _sql(
        "INSERT INTO workqueue_outbox_outboxrow (id, org_id, kind, payload, actor, status,"
        " last_error, created_at, relayed_at) SELECT gen_random_uuid(), %s, 'work.' || %s,"
        " jsonb_build_object('seq', g), 'bench', 'relayed', '', now(), now()"
        " FROM generate_series(1, %s) AS g",
        [org, ours.KIND, items // 10],
    )
    _sql(
        "INSERT INTO workqueue_storedresponse (id, org_id, user_id, key, fingerprint,"
        " status_code, body, created_at) VALUES (gen_random_uuid(), %s, 'u', 'k', 'f', 201,"
        " '{}', now())",
        [org],
    )
    _sql("INSERT INTO workqueue_tenantshare (org_id, weight) VALUES (%s, 2)", [org])
    _sql(
        "INSERT INTO workqueue_laneminute (minute, org_id, lane, done, failed, dead, waits,"
        " pending) VALUES (date_trunc('minute', now()), %s, 'erase-a', 1, 0, 0, '{}', 0)",
        [org],
    )
    _sql(
        "INSERT INTO workqueue_ratelimit (scope, target, count, period_s, burst, set_by)"
        " VALUES ('tenant', %s, 5, 1, 5, 'bench')",
        [str(org)],
    )
    runtime.keep_history(DAY_S, DAY_S)
    since = _sql("SELECT now()")[0][0] - timedelta(days=1)
    while (moved := runtime.move_history(since, 60.0, batch=5000, max_batches=1000)).moved:
        since = moved.through


class LockWaits(threading.Thread):
    """Every 20 ms, on a connection of its own, whether any session but the erase's waits for
    a lock (``pg_stat_activity.wait_event_type = 'Lock'``), by phase (before the erase, during
    it): samples taken, those that saw one, and what waited behind whom."""

    def __init__(self, dsn: str, erase_pid: int) -> None:
        super().__init__(daemon=True)
        self.dsn, self.erase_pid = dsn, erase_pid
        self.phase = "before"
        self.samples: Counter[str] = Counter()
        self.waiting: Counter[str] = Counter()
        # What waited, for what, behind whom, and how many samples saw it, during the erase.
        self.seen: Counter[tuple[str, str, str]] = Counter()
        self.stop = threading.Event()

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.wait(0.02):
                rows = conn.execute(
                    "SELECT wait_event, %s = ANY(pg_blocking_pids(pid)),"
                    " left(regexp_replace(query, '\\s+', ' ', 'g'), 70)"
                    " FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND pid <> %s",
                    [self.erase_pid, self.erase_pid],
                ).fetchall()
                phase = self.phase
                self.samples[phase] += 1
                self.waiting[phase] += bool(rows)
                for event, by_erase, query in rows if phase == "during" else []:
                    self.seen[(event, "the erase" if by_erase else "another", query)] += 1


def _b_done(org_id: Any) -> int:
    return int(
        _sql(
            "SELECT count(*) FROM workqueue_workitem WHERE org_id = %s AND status = 'done'",
            [org_id],
        )[0][0]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--backlog", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--before-s", type=float, default=10.0)
    parser.add_argument("--pause-ms", type=int, default=0, help="the erase's pause between batches")
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    import ours

    dsn = ours.fresh_database(args.database_url, DBNAME)
    ours.setup_django(dsn)
    ctx_a = ours.prepare(dsn)
    from django.contrib.auth import get_user_model

    from tenancy.contexts import Role
    from tenancy.models import Membership, Org
    from workqueue import api

    org_b = Org.objects.using("admin").create(name="B", slug=f"bench-b-{uuid.uuid4().hex[:8]}")
    user_b = get_user_model().objects.using("admin").create(username=f"b-{uuid.uuid4().hex[:8]}")
    Membership.objects.using("admin").create(org=org_b, user=user_b, role=Role.MEMBER)
    ctx_b = ours.context(org_b.pk, user_b.pk)

    t = time.monotonic()
    _fill_a(ctx_a, args.items)
    ours.fill_sql(ctx_b, args.backlog, {"seq": -1, "quiet": True})
    ours.settle(dsn)
    print(f"filled in {time.monotonic() - t:.1f} s", file=sys.stderr)
    before = _rows_of(ctx_a.org_id)

    workers = ours.RunWorkers("default", 1)
    try:
        time.sleep(2)  # draining B at full speed
        from django.db import connections

        with connections["system"].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            waits = LockWaits(dsn, cursor.fetchone()[0])
        waits.start()
        b0, t0 = _b_done(org_b.pk), time.monotonic()
        time.sleep(args.before_s)
        b1, t1 = _b_done(org_b.pk), time.monotonic()
        waits.phase = "during"
        result = api.erase("bench", ctx_a.org_id, batch=args.batch, pause_s=args.pause_ms / 1000)
        b2, t2 = _b_done(org_b.pk), time.monotonic()
        waits.stop.set()
        waits.join()
        if not result.complete:  # rows another transaction held: a second run takes them
            print(f"left after the first run: {result.left}", file=sys.stderr)
            result = api.erase("bench", ctx_a.org_id, batch=args.batch)
    finally:
        workers.stop()
    after = _rows_of(ctx_a.org_id)
    rate_before, rate_during = (b1 - b0) / (t1 - t0), (b2 - b1) / (t2 - t1)

    width = max(len(name) for name in before)
    print(f"{'table (tenant A)':<{width}} {'before':>9} {'after':>7}")
    for name, n in before.items():
        if n or after[name]:
            print(f"{name:<{width}} {n:>9,} {after[name]:>7,}")
    print(f"{'(every other table with an org_id)':<{width}} {0:>9} {0:>7}")
    print(f"rows of A left: {sum(after.values())} (erase says {sum(result.left.values())})")
    print(
        f"erase: {sum(result.erased.values()):,} rows in {t2 - t1:.1f} s, batch {args.batch}, "
        f"pause {args.pause_ms} ms"
    )
    print(f"B drained: {rate_before:,.0f} items/s before, {rate_during:,.0f} items/s during")
    for phase in ("before", "during"):
        print(
            f"a session waiting for a lock {phase} the erase: {waits.waiting[phase]} of "
            f"{waits.samples[phase]} samples"
        )
    for (event, behind, query), n in waits.seen.most_common(5):
        print(f"  {n} x {event} behind {behind}: {query}")
    if b2 >= args.backlog - 1:
        print("B's backlog ran out during the erase: raise --backlog", file=sys.stderr)
    return 0 if not sum(after.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
