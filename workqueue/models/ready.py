"""The ready ring: one narrow row per pending item, which the claim reads instead of the items.

An index that items leave from its front (the claim takes the oldest first) keeps an entry for
every item claimed since the oldest open snapshot began: a report held open in REPEATABLE READ,
a ``pg_dump``, a forgotten ``BEGIN`` keep VACUUM from removing any, and every claim walks them
all. ``TRUNCATE`` does not wait for that horizon, so the pending items are kept apart, in
partitions the ring's rotation empties in turn (``sql/schema/ready_v1.sql``,
``workqueue/ready.py``): what a claim walks past is bounded by what a few seconds of claims
leave, whatever any snapshot holds. The item's row stays the truth (its status): a ready row
only says where the claim finds it.
"""

from __future__ import annotations

from django.db import models


class Ready(models.Model):
    """A pending item as the claim finds it: its place in the ring (``slot``) and the columns
    the claim orders and filters by, copied from the item when it became pending. Written by the
    statements that make an item pending, deleted by the claim that takes it (or the cancel
    or discard that ends it); the rotation moves what a slot still holds before emptying it.
    Partitioned by ``slot``: its migration makes the table itself (``sql/schema/ready_v1.sql``)."""

    # Slot 0 holds the items due later than the ring's reach (``workqueue_ready_slot``); the
    # ring's slots 1 to 4 take the rest, by the second they were written in.
    pk = models.CompositePrimaryKey("id", "slot")
    slot = models.SmallIntegerField()
    id = models.UUIDField()
    org_id = models.UUIDField()
    lane = models.CharField(max_length=50)
    kind = models.CharField(max_length=100)
    priority = models.SmallIntegerField()
    available_at = models.DateTimeField()
    concurrency_key = models.CharField(max_length=200, null=True)
    rate_key = models.CharField(max_length=200, null=True)

    class Meta:
        db_table = "workqueue_ready"

    def __str__(self) -> str:
        return f"{self.kind} {self.id} (slot {self.slot})"
