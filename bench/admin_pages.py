"""Measure the admin's queue pages on a million work items: queries per page and time.

    .venv/bin/python bench/admin_pages.py [--items 1000000] [--runs 5] [--keep]
                                          [--payload-index] [--explain]

Runs on the embedded PostgreSQL (``bin/test`` or ``bin/run`` starts it) in a database of its
own (``bench_admin``, dropped afterwards unless ``--keep``), never on the database of a
running ``bin/run`` or of the tests. Fills it in SQL (as ``bench/systems/ours.py`` does):
ten tenants, time-ordered ids, 90% done, 8% pending, 1.5% failed, 0.5% claimed, then
``VACUUM ANALYZE``. Each page is fetched in-process through Django's test client, as the
operator (a superuser, every tenant on the system login) and as one tenant's staff (under
row-level security): one warm-up, then the median of ``--runs`` fetches, with the statements
each fetch sends on each login. Prints a table; measures, asserts nothing. ``--payload-index``
first makes an index on ``payload ->> 'n'`` (the console's payload search then reads it);
``--explain`` prints EXPLAIN (ANALYZE, BUFFERS) of every statement on the item table that the
operator's fetch of each items page sends.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
DATABASE = "bench_admin"

FILL = """
INSERT INTO workqueue_workitem (
    id, org_id, kind, lane, status, payload, idempotency_key, priority, available_at,
    claimed_by, claim_token, lease_expires_at, attempts, max_attempts, last_error,
    created_by, updated_by, request_id, traceparent, created_at, updated_at)
SELECT ('01900000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       (%(orgs)s::uuid[])[1 + g %% 10],
       CASE WHEN g %% 3 = 0 THEN 'NOTIFY_SHIPMENT' ELSE 'NOOP' END,
       'default',
       s.status,
       jsonb_build_object('n', g),
       CASE WHEN g %% 50 = 0 THEN 'key-' || g END,
       0,
       now() - make_interval(secs => (%(n)s - g) * 0.08),
       CASE WHEN s.status = 'claimed' THEN 'bench:1:w' END,
       CASE WHEN s.status = 'claimed' THEN gen_random_uuid() END,
       CASE WHEN s.status = 'claimed' THEN now() + interval '30 seconds' END,
       CASE WHEN s.status IN ('done', 'claimed') THEN 1 WHEN s.status = 'failed' THEN 5 ELSE 0 END,
       5,
       CASE WHEN s.status = 'failed'
            THEN 'RetryableError: gateway timeout' || chr(10) || 'Traceback ...' ELSE '' END,
       %(user)s::text, '(system)', NULL, NULL,
       now() - make_interval(secs => (%(n)s - g) * 0.08),
       now() - make_interval(secs => (%(n)s - g) * 0.08 - 1)
  FROM generate_series(1, %(n)s) AS g,
       LATERAL (SELECT CASE
                   WHEN g %% 1000 < 900 THEN 'done'
                   WHEN g %% 1000 < 980 THEN 'pending'
                   WHEN g %% 1000 < 995 THEN 'failed'
                   ELSE 'claimed' END AS status) AS s
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the bench_admin database")
    parser.add_argument(
        "--payload-index", action="store_true", help="index payload ->> 'n' before measuring"
    )
    parser.add_argument(
        "--explain", action="store_true", help="EXPLAIN the item-table statements of each page"
    )
    args = parser.parse_args()

    if os.environ.get("DATABASE_URL"):
        raise SystemExit("bench/admin_pages.py runs on the embedded server: unset DATABASE_URL")
    import django
    from django.conf import settings

    settings.DEBUG = False
    for alias in ("default", "system", "admin"):
        settings.DATABASES[alias]["NAME"] = DATABASE
    django.setup()

    from django.core.management import call_command
    from django.db import connections

    from tenancy.logins import connect_owner, ensure_logins

    owner = settings.DATABASES["admin"]
    ensure_logins(settings.DATABASES["default"], settings.DATABASES["system"], owner)
    with connect_owner(owner, "postgres") as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
            conn.execute(f"CREATE DATABASE {DATABASE}")
    ensure_logins(settings.DATABASES["default"], settings.DATABASES["system"], owner, (DATABASE,))
    try:
        call_command("migrate", database="admin", verbosity=0)
        staff, operator, first_item = _fill(args.items, args.payload_index)
        rows = _measure(staff, operator, first_item, args.runs, args.explain)
    finally:
        connections.close_all()
        if not args.keep:
            with connect_owner(owner, "postgres") as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    width = max(len(r[0]) for r in rows)
    print(f"\n{args.items:,} work items; median of {args.runs} fetches after one warm-up\n")
    print(f"{'page':<{width}}  {'status':>6}  {'queries (everyday/system)':>26}  {'ms':>8}")
    for page, status, default, system, ms in rows:
        print(f"{page:<{width}}  {status:>6}  {f'{default}/{system}':>26}  {ms:>8.1f}")


def _fill(n: int, payload_index: bool) -> tuple[Any, Any, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connections

    from tenancy.contexts import Role
    from tenancy.models import Membership, Org

    User = get_user_model()
    from tenancy.scope import tenant_scope

    orgs = [Org.objects.using("admin").create(name=f"Tenant {i}", slug=f"t{i}") for i in range(10)]
    operator = User.objects.using("admin").create(
        username="operator", is_staff=True, is_superuser=True
    )
    staff = User.objects.using("admin").create(username="staff", is_staff=True)
    with tenant_scope(orgs[0].pk, using="admin"):
        Membership.objects.using("admin").create(org=orgs[0], user=staff, role=Role.ADMIN)
    started = time.monotonic()
    with connections["admin"].cursor() as cursor:
        cursor.execute(FILL, {"orgs": [o.pk for o in orgs], "n": n, "user": staff.pk})
    with connections["admin"].cursor() as cursor:
        # The ready ring's rows of the pending items, as their enqueue would have written them.
        cursor.execute(
            "INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at)"
            " SELECT 1, id, org_id, lane, kind, priority, available_at FROM workqueue_workitem"
            " WHERE status = 'pending'"
        )
        if payload_index:
            cursor.execute(
                "CREATE INDEX bench_payload_n_idx ON workqueue_workitem ((payload ->> 'n'))"
            )
        cursor.execute("VACUUM ANALYZE workqueue_workitem")
        cursor.execute("VACUUM ANALYZE workqueue_ready")
        cursor.execute(
            "SELECT id FROM workqueue_workitem WHERE org_id = %s AND status = 'failed' LIMIT 1",
            [orgs[0].pk],
        )
        first_item = cursor.fetchone()[0]
    print(f"filled {n:,} items in {time.monotonic() - started:.1f} s", flush=True)
    return staff, operator, first_item


def _measure(
    staff: Any, operator: Any, item_id: Any, runs: int, explain: bool = False
) -> list[tuple[str, int, int, int, float]]:
    from django.db import connections
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    pages = [
        ("items", "/admin/workqueue/workitem/"),
        ("items ?status=pending", "/admin/workqueue/workitem/?status__exact=pending"),
        ("items ?status=failed", "/admin/workqueue/workitem/?status__exact=failed"),
        ("items ?kind=NOTIFY_SHIPMENT", "/admin/workqueue/workitem/?kind=NOTIFY_SHIPMENT"),
        ("items ?q=<id>", f"/admin/workqueue/workitem/?q={item_id}"),
        ("items ?q=<key>", "/admin/workqueue/workitem/?q=key-500"),
        # The console (docs/howto/console.md): search terms, orders, the workers page.
        ("items ?q=payload.n=<n>", "/admin/workqueue/workitem/?q=payload.n%3D424242"),
        (
            "items ?q=payload.n=<n>&scan=all",
            "/admin/workqueue/workitem/?q=payload.n%3D424242&scan=all",
        ),
        ("items ?q=error:<text>", "/admin/workqueue/workitem/?q=error:gateway"),
        ("items ?q=kind:<prefix>*", "/admin/workqueue/workitem/?q=kind:NOTIFY_*"),
        ("items ?created=hour", "/admin/workqueue/workitem/?created=hour"),
        (
            "items ?q=created>=20m created<10m",
            "/admin/workqueue/workitem/?q=created%3E%3D20m+created%3C10m",
        ),
        (
            "items ?status=failed&finished=today",
            "/admin/workqueue/workitem/?status__exact=failed&finished=today",
        ),
        ("items ?q=finished>=5m", "/admin/workqueue/workitem/?q=finished%3E%3D5m"),
        ("items ?sort=waiting", "/admin/workqueue/workitem/?sort=waiting"),
        ("items ?sort=attempts", "/admin/workqueue/workitem/?sort=attempts"),
        ("items ?sort=attempts&scan=all", "/admin/workqueue/workitem/?sort=attempts&scan=all"),
        ("items ?q=worker:<id>", "/admin/workqueue/workitem/?q=worker:bench:1:w"),
        ("workers", "/admin/workqueue_workers/queuegauges/workers/"),
        ("dead letters", "/admin/workqueue/deadletter/"),
        ("dead letters ?failed=day", "/admin/workqueue/deadletter/?failed=day"),
        ("dead letters ?q=<error text>", "/admin/workqueue/deadletter/?q=gateway+timeout"),
        ("dead letters ?q=<no such text>", "/admin/workqueue/deadletter/?q=no+such+text"),
        ("dead letters grouped", "/admin/workqueue/deadletter/groups/"),
        ("dead letters grouped ?q=<error text>", "/admin/workqueue/deadletter/groups/?q=gateway"),
        (
            "requeue all matching: confirm ?q=<error text>",
            "/admin/workqueue/deadletter/matching/requeue/?q=gateway",
        ),
        ("dead letter detail", f"/admin/workqueue/deadletter/{item_id}/change/"),
        ("gauges", "/admin/workqueue_workers/queuegauges/"),
    ]
    results = []
    for who, user in (("operator", operator), ("staff", staff)):
        client = Client(HTTP_HOST="127.0.0.1")
        client.force_login(user)
        wanted = list(pages)
        if who == "operator":
            org = staff.workqueue_memberships.using("admin").get().org_id
            wanted.insert(1, ("items ?org=<tenant>", f"/admin/workqueue/workitem/?org={org}"))
        for name, url in wanted:
            client.get(url)  # warm-up: connections, plans, templates
            times, counts = [], (0, 0)
            for _ in range(runs):
                with (
                    CaptureQueriesContext(connections["default"]) as on_default,
                    CaptureQueriesContext(connections["system"]) as on_system,
                ):
                    started = time.perf_counter()
                    response = client.get(url)
                    times.append((time.perf_counter() - started) * 1000)
                counts = (len(on_default.captured_queries), len(on_system.captured_queries))
            results.append(
                (f"{who}: {name}", response.status_code, *counts, statistics.median(times))
            )
            if explain and who == "operator" and url.startswith("/admin/workqueue/workitem/?"):
                _explain(name, [q["sql"] for q in on_system.captured_queries])
    return results


def _explain(name: str, statements: list[str]) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of each statement on the item table (as sent, its values in
    it), on the owner's login."""
    from django.db import connections

    for sql in statements:
        if 'FROM "workqueue_workitem"' not in sql:
            continue
        with connections["admin"].cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        print(f"\n== {name}\n{sql}\n{plan}", flush=True)


if __name__ == "__main__":
    main()
