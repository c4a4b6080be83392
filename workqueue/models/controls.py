"""The operator's controls over the queue, read by the claim statement: a tenant's share
(weight and cap), pauses, rate limits and their buckets. Each is global or the operator's, set
on the system login (workqueue/README.md, "Controls")."""

from __future__ import annotations

from collections.abc import Collection

from django.db import models
from django.db.models.functions import Now


class TenantShare(models.Model):
    """A tenant's share of the queue: its weight in the fair claim's round-robin, and the most
    of its items a lane runs at once (across every worker). Tenants without a row weigh 1 and
    take the default cap (``WORKQUEUE["MAX_IN_FLIGHT"]``, none unless set). Set by the operator."""

    org_id = models.UUIDField(primary_key=True)
    # A tenant of weight 2 gets twice the items of a tenant of weight 1 when both have work.
    weight = models.FloatField(default=1.0)
    # At most this many of the tenant's items claimed at once per lane; empty: the default.
    max_in_flight = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(weight__gte=0.01, weight__lte=1000),
                name="tenantshare_weight_in_range",
            ),
            models.CheckConstraint(
                condition=models.Q(max_in_flight__gte=1), name="tenantshare_cap_at_least_one"
            ),
        ]
        indexes = [
            # The capped tenants alone: whether any is (caps_in_effect, and the woken claim's
            # check in claim_one.sql) is one probe of an index that is nearly always empty.
            models.Index(
                fields=["org_id"],
                name="tenantshare_capped_idx",
                condition=models.Q(max_in_flight__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        cap = self.max_in_flight if self.max_in_flight is not None else "default"
        return f"{self.org_id}: weight {self.weight:g}, at most {cap} in flight"


class Pause(models.Model):
    """A lane, or one kind in a lane (``kind`` set), whose pending items no worker claims until
    an operator resumes it; items already claimed run to their end. Global (not a tenant's):
    only the operator sets one, on the system login; the everyday login has no right on the
    table. The claim statement reads it (one index probe per claim)."""

    id = models.BigAutoField(primary_key=True)
    lane = models.CharField(max_length=50)
    # Empty: the whole lane.
    kind = models.CharField(max_length=100, blank=True, default="")
    # Who paused it (an actor) and why.
    paused_by = models.CharField(max_length=255)
    reason = models.CharField(max_length=500, blank=True, default="")
    paused_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["lane", "kind"], name="pause_one_per_lane_and_kind")
        ]

    def __str__(self) -> str:
        return f"{self.lane}:{self.kind}" if self.kind else self.lane

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        """Not checked by a query here (the admin's form runs this on the everyday login,
        which may not read the table): one pause per lane and kind is the pause statement's
        own ``ON CONFLICT``, on the system login."""


class RateLimit(models.Model):
    """At most ``count`` items per ``period_s`` claimed of a kind, a lane, a tenant or a rate
    key (``target``; ``*``: each kind, lane, tenant or key its own bucket), with ``burst`` at
    once after a quiet spell. Global, the operator's (system login only, like ``Pause``); the
    claim statement reads it and keeps each bucket's state in ``RateBucket``."""

    class Scope(models.TextChoices):
        # What the limit counts items by.
        KIND = "kind"
        LANE = "lane"
        TENANT = "tenant"
        KEY = "key"

    id = models.BigAutoField(primary_key=True)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    # The kind's or lane's name, the tenant's id, the rate key; "*": every one, each apart.
    target = models.CharField(max_length=200)
    count = models.PositiveIntegerField()
    period_s = models.PositiveIntegerField()
    # How many may go at once when the bucket is full (GCRA's burst).
    burst = models.PositiveIntegerField()
    set_by = models.CharField(max_length=255)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "target"], name="ratelimit_one_per_target"),
            models.CheckConstraint(
                condition=models.Q(count__gte=1, period_s__gte=1, burst__gte=1),
                name="ratelimit_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.target}: {self.count} per {self.period_s}s"

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        """Not checked by a query here (the everyday login may not read the table): the
        statement that sets a limit keeps one per scope and target (``ON CONFLICT``)."""


class RateBucket(models.Model):
    """One bucket of a rate limit: its theoretical arrival time (GCRA), written by the claim
    statement that spends from it. No foreign key: a limit cleared while a claim runs leaves at
    most a stray bucket that no limit reads (``clear_rate_limit`` deletes a limit's buckets).
    Its pages are kept half empty (fillfactor 50, migration 0013), so that rewrite stays on the
    row's page."""

    pk = models.CompositePrimaryKey("limit_id", "key")
    limit_id = models.BigIntegerField()
    # The kind, lane, tenant id or rate key the bucket counts.
    key = models.CharField(max_length=200)
    # The bucket allows n more now where now + burst * interval - greatest(tat, now) >= n *
    # interval (interval = period_s / count).
    tat = models.DateTimeField()
    # When it allows one more (tat - (burst - 1) * interval), written by the claim that leaves
    # it allowing nothing; while it allows some, a moment already past (the claim leaves it as it
    # was, so a claim's rewrite of tat is a HOT update). Indexed, so the claim reads the buckets
    # that allow nothing now (free_at > now()) and no other.
    free_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["free_at"], name="ratebucket_free_at_idx")]
