"""The queue's minutes: what the attempts came to, per tenant, lane and minute, rolled up by the
sweep for the gauges page's charts (``workqueue/minutes.py``), and where the rollup got to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    _ListField = models.Field[list[int], list[int]]
else:  # Django's Field takes no type arguments at run time
    _ListField = models.Field


class IntegerArrayField(_ListField):
    """An ``integer[]`` column, written and read by the rollup's statements only (Django's
    ``ArrayField`` would need ``django.contrib.postgres`` in the site's ``INSTALLED_APPS``)."""

    def db_type(self, connection: Any) -> str:
        return "integer[]"


class LaneMinute(models.Model):
    """One minute (by the database's clock) of one tenant's lane: the attempts that ended in it,
    the waits of the claims that ended their item, and how many items were pending. Written by
    the sweep only (``roll_up_minutes``, ``sample_pending``) on the system login; read under
    row-level security by a tenant's staff. Rows exist only for minutes with something to say,
    and are purged after ``ROLLUP_RETENTION_S``."""

    pk = models.CompositePrimaryKey("minute", "org_id", "lane")
    minute = models.DateTimeField()
    org_id = models.UUIDField()
    # A lane no one declares is counted as ``workqueue.lanes.UNDECLARED``: the rows stay
    # bounded whatever lanes callers make up.
    lane = models.CharField(max_length=50)
    # Attempts that ended in the minute: done, failed (retried, handed back or dead-lettered),
    # and those of them that made a dead letter.
    done = models.IntegerField()
    failed = models.IntegerField()
    dead = models.IntegerField()
    # How many claims waited how long from due to claimed, counted in the buckets of
    # ``workqueue.minutes.WAIT_BOUNDS_S`` (element k: waits below bound k and not below bound
    # k - 1; the last, waits at or past the last bound). Histograms add up across tenants and
    # minutes, where percentiles would not.
    waits = IntegerArrayField()
    # Items pending in the lane at the minute's first sweep pass (0 when it had none).
    pending = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.lane}: {self.done} done, {self.failed} failed"


class RollupState(models.Model):
    """How far the rollup has read the attempts (one row, ``attempts``). Belongs to no tenant:
    the system login only (the everyday login has no right on it).

    Attempts are read in id order, but an id is taken before its transaction commits, so a
    smaller id may appear after a larger one was read. The rollup reads up to a *mark* (the
    newest id visible when it was taken) only once every transaction in progress at the mark
    has ended: each of them had written its item's row before taking an attempt id, so each
    was in progress then, and nothing at or below the mark can appear later."""

    name = models.CharField(primary_key=True, max_length=50)
    # Every attempt with an id up to this one is counted (or was rolled back: never will be).
    through_id = models.BigIntegerField()
    # The newest attempt id visible when the mark was taken, the snapshot it was read in
    # (``pg_current_snapshot()`` as text: the transactions in progress then), and when (the
    # database's clock).
    mark_id = models.BigIntegerField()
    mark_snapshot = models.TextField()
    marked_at = models.DateTimeField()
    # The last minute whose pending items were counted (once per minute).
    pending_minute = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.name}: through {self.through_id}, mark {self.mark_id}"


class KindMinute(models.Model):
    """One minute of one tenant's kind in a lane: how long its oldest due pending item had
    waited at the minute's first sweep pass (``sample_pending``), and how long its attempts ran
    (``roll_up_minutes``: each attempt a handler ran, from its claim to its end, counted in the
    buckets of ``workqueue.minutes.WAIT_BOUNDS_S``). Written by the sweep on the system login,
    read under row-level security like ``LaneMinute``, purged with it."""

    pk = models.CompositePrimaryKey("minute", "org_id", "lane", "kind")
    minute = models.DateTimeField()
    org_id = models.UUIDField()
    # Lanes no one declares count as ``UNDECLARED``, kinds no one registers as ``UNKNOWN_KIND``:
    # the rows stay bounded whatever callers made up.
    lane = models.CharField(max_length=50)
    kind = models.CharField(max_length=100)
    # Seconds the oldest due pending item had waited (NULL: none was due then, or not sampled).
    oldest_wait_s = models.FloatField(null=True)
    # How many attempts ran how long (every bucket present; zeros where none ended).
    runs = IntegerArrayField()

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.lane} {self.kind}"
