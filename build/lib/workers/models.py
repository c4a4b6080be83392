"""The workers' own rows: each worker process's liveness."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class WorkerState(models.TextChoices):
    # Claiming and running work.
    RUNNING = "running", "Running"
    # Stopped claiming; finishing or releasing what it holds.
    DRAINING = "draining", "Draining"
    # Gone, after a clean shutdown.
    OFFLINE = "offline", "Offline"


class Worker(models.Model):
    """One ``runworker`` process, as it last reported itself (best effort; not a lock)."""

    id = models.CharField(primary_key=True, max_length=200)
    kind = models.CharField(max_length=200)
    lane = models.CharField(max_length=50)
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    started_at = models.DateTimeField(db_default=Now())
    last_beat_at = models.DateTimeField(db_default=Now())
    state = models.CharField(max_length=10, choices=WorkerState.choices)

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"


class QueueGauges(Worker):
    """The admin's queue gauges page, as an entry of the admin's index (a proxy: no table of its
    own; ``workers/admin.py`` shows the page instead of a list)."""

    class Meta:
        proxy = True
        verbose_name = verbose_name_plural = "queue gauges"
