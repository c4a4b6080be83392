"""Each Django task's record: what its work item does not hold."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class TaskRecord(models.Model):
    """A task's attempts, beside its work item (which holds its status, arguments, priority,
    queue, last error and return value, its ``result``): the worker of each attempt, the first
    and the latest start, and the error of each of the last ``records.ERRORS_KEPT`` attempts
    that raised.

    Written only by the worker, through statements fenced by the item's claim token
    (``sql/record_start.sql``, ``sql/record_end.sql``); read by the task's tenant under
    row-level security. It goes with its item: the foreign key cascades in the database
    (``ON DELETE CASCADE``, made by migration 0002, since Django 6.0 has no database-level
    ``on_delete``), because the queue's purge deletes items in bulk with raw SQL.
    """

    item = models.OneToOneField(
        "workqueue.WorkItem",
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,  # the constraint, with its cascade, is migration 0002's
        related_name="+",
    )
    # The item's tenant (row-level security); copied from the item by the statement that
    # makes the record, so it can never name another. No constraint: orgs are never deleted.
    org_id = models.UUIDField()
    # One entry per attempt started, in order (Django's TaskResult.attempts is its length).
    worker_ids = models.JSONField(default=list)
    started_at = models.DateTimeField(db_default=Now())
    last_attempted_at = models.DateTimeField(db_default=Now())
    # [{"exception_class_path": ..., "traceback": ...}], oldest first.
    errors = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"task record {self.item_id}"
