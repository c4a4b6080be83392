"""Upgrading a site whose finished tasks kept their return values on their records: migration
``workqueue_tasks.0003`` moves each onto its item's result (and back, unapplied)."""

from __future__ import annotations

import json
import uuid

from django.db import connections
from django.db.migrations.executor import MigrationExecutor

from tests import tasks
from workqueue.models import Status, WorkItem

BEFORE = ("workqueue_tasks", "0002_row_level_security_and_cascade")
AFTER = ("workqueue_tasks", "0003_return_value_on_the_item")


def _migrate(target: tuple[str, str] | None) -> None:
    """To ``target``, or (None) back to every app's latest migration."""
    executor = MigrationExecutor(connections["admin"])
    executor.loader.build_graph()
    executor.migrate([target] if target else executor.loader.graph.leaf_nodes())


def test_stored_return_values_move_onto_their_items(ctx) -> None:  # type: ignore[no-untyped-def]
    from tenancy.current import using_context

    with using_context(ctx):
        done, waiting = (uuid.UUID(tasks.add.enqueue(n, n).id) for n in (1, 2))
    WorkItem.objects.using("admin").filter(pk=done).update(status=Status.DONE)
    _migrate(BEFORE)
    try:
        with connections["admin"].cursor() as cursor:
            for item_id, value in ((done, {"sum": 3}), (waiting, None)):
                cursor.execute(
                    "INSERT INTO workqueue_tasks_taskrecord"
                    " (item_id, org_id, worker_ids, started_at, last_attempted_at, return_value,"
                    " errors) VALUES (%s, %s, '[]', now(), now(), %s, '[]')",
                    [item_id, ctx.org_id, None if value is None else json.dumps(value)],
                )
    finally:
        _migrate(AFTER)
    results = dict(WorkItem.objects.using("admin").values_list("id", "result"))
    assert results == {done: {"sum": 3}, waiting: None}
    _migrate(BEFORE)
    try:
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT item_id, return_value FROM workqueue_tasks_taskrecord")
            back = {row[0]: row[1] for row in cursor.fetchall()}
        assert back == {done: '{"sum": 3}', waiting: None}
    finally:
        _migrate(None)
