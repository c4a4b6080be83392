"""Helpers for tests: rows as stored, back-dated rows, and the statements a call sends."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from django.db import connections

from workqueue.claim import claim
from workqueue.models import WorkItem


def row(item_id: uuid.UUID) -> WorkItem:
    """The item as stored, read as the owner (no tenant, no fence)."""
    return WorkItem.objects.using("admin").get(pk=item_id)


def back_date(item_id: uuid.UUID, **seconds_ago: float) -> None:
    """Move the item's timestamps into the past, e.g. ``lease_expires_at=90``: the database's
    clock decides every transition, so tests make rows old rather than freezing a clock."""
    sets = ", ".join(f"{column} = now() - make_interval(secs => %s)" for column in seconds_ago)
    if "updated_at" in seconds_ago:
        # Still the moment its ready row was written (the rotation would give it a second one).
        sets += ", ringed_at = CASE WHEN ringed_at = updated_at THEN now() - make_interval("
        sets += "secs => %s) ELSE ringed_at END"
    params = [
        *seconds_ago.values(),
        *([seconds_ago["updated_at"]] if "updated_at" in seconds_ago else []),
    ]
    with connections["admin"].cursor() as cursor:
        cursor.execute(f"UPDATE workqueue_workitem SET {sets} WHERE id = %s", [*params, item_id])
        if "available_at" in seconds_ago:
            # Its ready row is ordered by when it is due: it moves too (into the ring when due).
            cursor.execute(
                "UPDATE workqueue_ready SET available_at = w.available_at,"
                " slot = workqueue_ready_slot(w.available_at)"
                " FROM workqueue_workitem w WHERE w.id = %s AND workqueue_ready.id = w.id",
                [item_id],
            )


@contextmanager
def statements(*aliases: str) -> Iterator[list[str]]:
    """Collect every statement sent on ``aliases`` (one entry per round trip)."""
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        seen.append(sql)
        return execute(sql, params, many, context)

    with ExitStack() as stack:
        for alias in aliases:
            stack.enter_context(connections[alias].execute_wrapper(wrapper))
        yield seen


def back_date_outbox(row_id: uuid.UUID, **seconds_ago: float) -> None:
    """Move an outbox row's timestamps into the past, as ``back_date`` does for items."""
    sets = ", ".join(f"{column} = now() - make_interval(secs => %s)" for column in seconds_ago)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            f"UPDATE workqueue_outbox_outboxrow SET {sets} WHERE id = %s",
            [*seconds_ago.values(), row_id],
        )


def dead_letter(  # type: ignore[no-untyped-def]
    ctx,
    rctx,
    payload: dict | None = None,
    error: str = "boom",
    kind: str = "NOOP",
    traceback: str | None = None,
    worker: str = "w-dead",
):
    """A dead letter of ``ctx``'s tenant, made the way the product makes one: enqueued in a lane
    of its own (so the claim takes it alone), claimed by ``worker``, failed for good (with its
    audit entry and its attempt, carrying ``traceback``)."""
    from workqueue import api, settle

    lane = f"dl-{uuid.uuid4().hex[:12]}"
    item, _ = api.enqueue(ctx, kind, payload or {"n": 1}, lane=lane)
    [(item_ctx, held)] = claim(rctx, lane, [kind], worker, 30, 10)
    assert held.id == item.id
    return settle.fail(item_ctx, held, error, permanent=True, traceback=traceback)


def fresh_async_connections() -> None:
    """Close the connections of ``sync_to_async``'s one thread (Django's async face runs its
    queries there): they outlive tests, and one ended by an earlier test's outage (the runtime
    suite cuts every session of the logins) would fail this row's first query."""
    from asgiref.sync import sync_to_async

    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def queue_settings(**changes: object):  # type: ignore[no-untyped-def]
    """``override_settings`` of some ``WORKQUEUE`` names, the others as the site has them."""
    from django.conf import settings
    from django.test import override_settings

    return override_settings(WORKQUEUE={**settings.WORKQUEUE, **changes})


def many_dead(
    org_id: uuid.UUID,
    n: int,
    kind: str = "NOOP",
    error: str = "PermanentError: shipment not found",
    lane: str = "default",
    failed_s_ago: float = 60.0,
) -> list[uuid.UUID]:
    """``n`` dead letters of one tenant in one statement, as the owner (a bad deploy's worth,
    too many to make one by one): failed ``failed_s_ago`` seconds ago, a second apart from the
    newest down to the oldest, each with ``error`` (and a traceback under its first line)."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO workqueue_workitem (
                id, org_id, kind, lane, status, payload, priority, available_at, attempts,
                max_attempts, last_error, created_by, updated_by, created_at, updated_at)
            SELECT gen_random_uuid(), %s, %s, %s, 'failed', jsonb_build_object('n', g), 0,
                   now(), 5, 5, %s || chr(10) || 'Traceback (most recent call last): ...',
                   '(system)', '(system)', now() - interval '1 hour',
                   now() - make_interval(secs => %s + g * 0.001)
              FROM generate_series(1, %s) AS g
            RETURNING id
            """,
            [org_id, kind, lane, error, failed_s_ago, n],
        )
        return [r[0] for r in cursor.fetchall()]


def with_children(tables: dict[str, str]) -> dict[str, str]:
    """``tables`` (name -> tenant column) and each one's inheritance children (history's spans,
    ``workqueue/history.py``; not a partitioned table's partitions), each with its parent's
    tenant column."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, p.relname FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent"
            " WHERE p.relname = ANY(%s) AND c.relkind = 'r' AND NOT c.relispartition",
            [list(tables)],
        )
        children = {child: tables[parent] for child, parent in cursor.fetchall()}
    return {**tables, **children}


def insert_items(org_id: uuid.UUID, n: int, kind: str = "NOOP", status: str = "done") -> None:
    """``n`` items of ``org_id`` in one statement, payload ``{"n": i}``, the oldest first with
    time-ordered ids (a millisecond apart, ending now, their tails random so that two calls in
    the same millisecond do not collide), as a busy site's table holds them."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            """
            WITH g AS (
                SELECT i, (extract(epoch FROM clock_timestamp()) * 1000)::bigint - %(n)s + i AS ms
                  FROM generate_series(1, %(n)s) AS i
            )
            INSERT INTO workqueue_workitem
                   (id, org_id, kind, lane, status, payload, priority, attempts, max_attempts,
                    last_error, created_by, updated_by, created_at, updated_at)
            SELECT (lpad(to_hex(g.ms), 12, '0') || '70008'
                    || substr(replace(gen_random_uuid()::text, '-', ''), 18, 15))::uuid,
                   %(org)s, %(kind)s, 'default', %(status)s, jsonb_build_object('n', g.i), 0, 1, 3,
                   '', 'system', 'system', to_timestamp(g.ms / 1000.0), to_timestamp(g.ms / 1000.0)
              FROM g
            """,
            {"n": n, "org": org_id, "kind": kind, "status": status},
        )


@contextmanager
def payload_index(expression: str, using: str = "btree") -> Iterator[None]:
    """An index on ``expression`` on the item table and each of its history children."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT 'workqueue_workitem' UNION ALL SELECT inhrelid::regclass::text FROM pg_inherits"
            " WHERE inhparent = 'workqueue_workitem'::regclass"
        )
        tables = [t for (t,) in cursor.fetchall()]
        names = [f"test_payload_{i}_idx" for i in range(len(tables))]
        for table, name in zip(tables, names, strict=True):
            cursor.execute(f"CREATE INDEX {name} ON {table} USING {using} ({expression})")
        try:
            yield
        finally:
            for name in names:
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
