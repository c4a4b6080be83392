"""The workers' own rows: each worker process's liveness."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class WorkerState(models.TextChoices):
    # Claiming and running work.
    RUNNING = "running", "Running"
    # Stopped claiming; finishing or releasing what it holds.
    DRAINING = "draining", "Draining"
    # Told to stop now (an operator's forced stop, as at a second SIGTERM): cancelling what it
    # runs, releasing it.
    STOPPING = "stopping", "Stopping"
    # Gone, after a clean shutdown.
    OFFLINE = "offline", "Offline"


class Worker(models.Model):
    """One ``runworker`` process, as it last reported itself (best effort; not a lock)."""

    id = models.CharField(primary_key=True, max_length=200)
    # The kinds it serves, comma-separated (a worker serving every kind lists them all).
    kind = models.TextField()
    lane = models.CharField(max_length=50)
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    started_at = models.DateTimeField(db_default=Now())
    last_beat_at = models.DateTimeField(db_default=Now())
    state = models.CharField(max_length=10, choices=WorkerState.choices)
    # The release it runs (``settings.RELEASE``, "dev" when the site names none), written by
    # each heartbeat; empty for a worker of a release from before the column.
    version = models.CharField(max_length=100, blank=True, db_default="")
    # The key of the liveness lock the worker holds (a session-level advisory lock on a
    # connection of its own, a new key for each connection), written before it claims under
    # it. NULL: it holds none (an older release, or WORKER_LIVENESS_LOCK off), and its items
    # wait for their lease. The sweep's rescue hands back the items of a worker whose lock no
    # session holds (workers/sweep/rescue.py), and clears the key once it holds none.
    lock_key = models.BigIntegerField(null=True)
    # When the rescue first saw that lock free (the database's clock); its items go back once
    # a later look, at least SWEEP_RESCUE_GRACE_S on, still finds it free.
    lock_lost_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"


class QueueGauges(Worker):
    """The admin's queue gauges page, as an entry of the admin's index (a proxy: no table of its
    own; ``workers/admin.py`` shows the page instead of a list)."""

    class Meta:
        proxy = True
        verbose_name = verbose_name_plural = "queue gauges"


class ScheduleState(models.Model):
    """Where one declared schedule (``workers.schedules``) stands: the tick it has come to, how
    many ticks it skipped, and whether an operator paused it. Belongs to no tenant (a schedule
    of every tenant has one row): the system login only, like the workers' rows."""

    name = models.CharField(primary_key=True, max_length=100)
    # The latest tick the schedule has claimed (enqueued, or will: ``delivered``). NULL: start
    # afresh at the next tick (a new schedule, or one just resumed), so nothing fires late.
    last_tick = models.DateTimeField(null=True)
    # Whether the claimed tick's items are all enqueued; false only between the claim and the
    # enqueue (a sweeper that dies there leaves it for the next pass).
    delivered = models.BooleanField(db_default=True)
    # The latest tick whose items were enqueued (what the gauges show as its last tick).
    last_enqueued_tick = models.DateTimeField(null=True)
    # Ticks that came due while no sweeper ran and were never enqueued (no catch-up burst).
    skipped = models.BigIntegerField(db_default=0)
    # Ticks enqueued (each once, for every tenant it serves).
    enqueued = models.BigIntegerField(db_default=0)
    paused = models.BooleanField(db_default=False)
    # Who paused or resumed it last, and when (the audit trail has every change).
    changed_by = models.CharField(max_length=255, blank=True, db_default="")
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"schedule {self.name}"


class RescueTurn(models.Model):
    """When a rescue timer last looked for gone workers, by the database's clock, and how many
    workers had a liveness lock then. Each look reads every worker's row and lock: were every
    worker to look each SWEEP_RESCUE_INTERVAL_S, a fleet would pay with the square of its size.
    So a timer looks only when no look was taken in most of an interval (``find_gone_holders``
    takes the turn), and each worker asks less often the larger the fleet (about four asks an
    interval between them: ``workers.sweep.rescue``). One row (id 1), written by the look's own
    statement."""

    id = models.SmallIntegerField(primary_key=True)
    looked_at = models.DateTimeField()
    workers = models.IntegerField()

    def __str__(self) -> str:
        return f"rescue looked at {self.looked_at}"
