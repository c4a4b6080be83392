"""The outbox: rows written in a domain change's own transaction, relayed afterwards."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from workqueue.runtime import new_item_id

# A row whose kind starts with this becomes a work item of the kind after it.
WORK_PREFIX = "work."


class OutboxStatus(models.TextChoices):
    # Written; waiting for the relay.
    PENDING = "pending", "Pending"
    # Done: enqueued as work, or published as a notification. Purged after the retention.
    RELAYED = "relayed", "Relayed"
    # Could not be relayed (its work kind is gone from this release): kept for a human.
    FAILED = "failed", "Failed"


class OutboxRow(models.Model):
    """Something that must follow a domain write: work to enqueue (``work.<KIND>``) or a
    notification to publish (any other kind, as the channel name). Written by ``emit`` in the
    caller's transaction, so it exists exactly when the domain write does."""

    # Time-ordered; also the id (and idempotency key) of the work item it becomes.
    id = models.UUIDField(primary_key=True, default=new_item_id, editable=False)
    org_id = models.UUIDField()
    kind = models.CharField(max_length=110)
    payload = models.JSONField(default=dict)
    # Who made the change (the context's user); the work item it becomes is authored by them.
    # Who made the domain change: a user's primary key as text, or the system actor.
    actor = models.CharField(max_length=255)
    request_id = models.UUIDField(null=True, blank=True)
    traceparent = models.CharField(max_length=55, null=True, blank=True)
    status = models.CharField(
        max_length=10, choices=OutboxStatus.choices, default=OutboxStatus.PENDING
    )
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    relayed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "outbox row"
        indexes = [
            # The relay and the lag gauge: pending rows, oldest first.
            models.Index(
                fields=["created_at"],
                condition=models.Q(status="pending"),
                name="outbox_pending_idx",
            ),
            # The purge: relayed rows by age.
            models.Index(
                fields=["relayed_at"],
                condition=models.Q(status="relayed"),
                name="outbox_relayed_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"
