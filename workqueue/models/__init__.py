"""The work item: one unit of work for one tenant, claimed by one worker at a time."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import JSONField, Value
from django.db.models.functions import Now
from uuid_utils.compat import uuid7


class Status(models.TextChoices):
    # Waits for other items, its parents, to finish (workqueue/workflows): no claim sees it; the
    # completion of its last parent makes it pending.
    WAITING = "waiting", "Waiting"
    # Waiting to be claimed, from available_at on.
    PENDING = "pending", "Pending"
    # Held by one worker under a lease and a claim token.
    CLAIMED = "claimed", "Claimed"
    # Finished; purged after the retention.
    DONE = "done", "Done"
    # A dead letter: attempts spent or a permanent error. Final until a human requeues it.
    FAILED = "failed", "Failed"
    # Set aside by an operator in the admin (triage): never run; the audit entry keeps its
    # payload and error. Purged like finished items.
    DISCARDED = "discarded", "Discarded"
    # Cancelled (workqueue/cancel.py): a pending item at once, a claimed one by its holder once
    # its lease renewal reported the request. Never run again; purged like discarded items.
    CANCELLED = "cancelled", "Cancelled"


# Every status but done: what the workflow index covers (a step's completion adds it no entry).
NOT_DONE = [status for status in Status.values if status != Status.DONE]


def new_item_id() -> uuid.UUID:
    """A time-ordered id (UUIDv7): inserts append to the primary key's last pages instead of
    dirtying random ones, which keeps enqueues and their WAL small."""
    return uuid7()


class WorkItem(models.Model):
    """A unit of work. Only the transitions in this app change its status and claim fields."""

    id = models.UUIDField(primary_key=True, default=new_item_id, editable=False)
    # The tenant. No index of its own: every status change would pay for one; the tenant's
    # reads go through the claim, stale and finished indexes under row-level security. No
    # foreign key: the tenant may be the tenancy app's org, the one implicit tenant of a
    # single-tenant site, or a site's own (WORKQUEUE["TENANCY"]); row-level security pins it to
    # the tenant the transaction names, and the claim fails the work of a gone tenant as
    # orphaned. (Checking a foreign key would also slow every enqueue.)
    org_id = models.UUIDField()
    kind = models.CharField(max_length=100)
    lane = models.CharField(max_length=50, default="default")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    payload = models.JSONField(default=dict)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    # At most one item of a tenant with this key is claimed at any moment; the others wait, the
    # first in claim order (priority, then age) next. Enforced by the database: the unique
    # index on claimed items and the claim statement (workqueue/sql/claim.sql).
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)
    # The key a rate limit of scope "key" counts the item under (e.g. the remote account it
    # calls): workqueue/rate_limits.py.
    rate_key = models.CharField(max_length=200, null=True, blank=True)
    # Higher runs first; equal priorities run oldest first.
    priority = models.SmallIntegerField(default=0)
    available_at = models.DateTimeField(db_default=Now())
    claimed_by = models.CharField(max_length=200, null=True, blank=True)
    # When the last claim began (the database's clock): the start of the attempt it made. Kept
    # after the attempt ends, so its record (``Attempt``) can name it.
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Minted afresh by every claim; every later write by the holder must present it.
    claim_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Counted at claim, so a worker that dies on an item still spends its attempts.
    attempts = models.IntegerField(default=0)
    max_attempts = models.IntegerField(default=5)
    last_error = models.TextField(blank=True, default="")
    # Actors: a user's primary key as text, or the system actor (tenancy.contexts.SYSTEM_ACTOR).
    created_by = models.CharField(max_length=255)
    updated_by = models.CharField(max_length=255)
    request_id = models.UUIDField(null=True, blank=True)
    traceparent = models.CharField(max_length=55, null=True, blank=True)
    # When someone asked to cancel it (workqueue/cancel.py). A claimed item stays claimed until
    # its holder learns of the request at its next lease renewal and ends it cancelled.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # The workflow it is a step of (workqueue/workflows): every step of one declaration shares
    # it, the id of the workflow's first step. None for a plain item.
    workflow_id = models.UUIDField(null=True, blank=True)
    # How many of its edges (``Dependency``) are not met yet; a waiting item becomes pending
    # when this reaches 0, in the statement that ends its last parent.
    waiting_on = models.IntegerField(db_default=0)
    # Whether some item waits for this one (it is a parent of an edge): the statements that end
    # an item meet edges only for these, so ending a plain item costs nothing more.
    has_dependents = models.BooleanField(db_default=False)
    # What the handler returned (JSON), written by the statement that marks the item done,
    # under its claim token; NULL until then, and when the handler returned None. Bounded like
    # the payload (WORKQUEUE["MAX_PAYLOAD_BYTES"]); kept as long as the item.
    result = models.JSONField(null=True, blank=True)
    # How far its handler got (run.progress: workqueue/progress.py): {"done", "total", "note",
    # "at"}, "at" the database's clock when it was written. Written by the worker under the
    # claim token, at most every WORKER_PROGRESS_FLUSH_S and once more before the outcome;
    # NULL until the first report; kept after the item ends.
    progress = models.JSONField(null=True, blank=True)
    # What its handlers said about it (run.set_meta), each report merged key by key into what
    # is there (jsonb ||), under the same fence and throttle. Never NULL: merging needs an
    # object; the database's own default too, so a row any statement inserts has one.
    meta = models.JSONField(default=dict, db_default=Value({}, JSONField()), blank=True)
    # When the statement that last made it pending gave it its ready row
    # (workqueue/models/ready.py): that statement's updated_at. A pending item whose ringed_at
    # is not its updated_at was made pending by a release before the ring (or before the
    # upgrade), without one; the ring's rotation gives it one (workitem_unringed_idx finds it).
    ringed_at = models.DateTimeField(null=True, editable=False)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            # Partial: items without a key (most) cost this index nothing on every update.
            models.UniqueConstraint(
                fields=["org_id", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="workitem_one_per_idempotency_key",
            ),
            models.CheckConstraint(
                condition=models.Q(attempts__gte=0), name="workitem_attempts_not_negative"
            ),
            # Each edge is counted once: below 0 would be a count gone wrong.
            models.CheckConstraint(
                condition=models.Q(waiting_on__gte=0), name="workitem_waiting_on_not_negative"
            ),
            # One claimed item per (tenant, concurrency key), whatever any claimer believes.
            # Partial: items without a key, and items not claimed, cost it nothing.
            models.UniqueConstraint(
                fields=["org_id", "concurrency_key"],
                condition=models.Q(status="claimed", concurrency_key__isnull=False),
                name="workitem_one_claimed_per_key",
            ),
        ]
        indexes = [
            # The pending items without a ready row (made pending by a release before the ring):
            # the rotation gives each one. Empty once none is left, and no statement of this
            # release writes an entry: its pending items are ringed as they are written.
            models.Index(
                fields=["id"],
                condition=models.Q(status="pending") & ~models.Q(ringed_at=models.F("updated_at")),
                name="workitem_unringed_idx",
            ),
            # The sweep: claimed rows whose lease passed.
            models.Index(
                fields=["lease_expires_at"],
                condition=models.Q(status="claimed"),
                name="workitem_stale_idx",
            ),
            # The purge: finished rows by age.
            models.Index(
                fields=["updated_at"],
                condition=models.Q(status__in=["done", "failed"]),
                name="workitem_finished_idx",
            ),
            # Triage: dead letters (and discarded and cancelled items) by when they got there, so
            # the admin's dead-letter list never walks the done rows, and the set-aside rows can
            # be purged.
            models.Index(
                fields=["updated_at"],
                condition=models.Q(status__in=["failed", "discarded", "cancelled"]),
                name="workitem_triage_idx",
            ),
            # A workflow's steps that are not done, by status: its live ones (what its cancel
            # reads) and those that ended otherwise (a dead step holding the rest, cancelled,
            # discarded), which its admin page counts and lists. Never done rows: plain items,
            # and a step's completion (a member's: its new row is done), cost it nothing; the
            # endings it takes are rare. (Every step, done ones too: ``WorkflowStep``.)
            models.Index(
                fields=["workflow_id", "status"],
                condition=models.Q(workflow_id__isnull=False, status__in=NOT_DONE),
                name="workitem_workflow_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"


class Needs(models.TextChoices):
    # The child waits until the parent is done (a dead parent holds it).
    DONE = "done", "Done"
    # The child waits until the parent has finished, however: done, failed for good,
    # cancelled or discarded (a group's on_complete).
    FINISHED = "finished", "Finished"


class Dependency(models.Model):
    """An edge of a workflow: ``child_id`` waits for ``parent_id`` (as ``needs`` says). Written
    with the child, in the declaration's statement, and never changed: whether it is met follows
    from the parent's status (done meets it; failed for good, cancelled or discarded meet it when
    it needs ``finished``), and the statement that changes that status moves the child's
    ``waiting_on`` (``workqueue/dependents.py``). No foreign keys: the statements that end an
    item do not check one, and the purge deletes an item's edges with it. The statement that
    writes edges refuses one whose two items are not both of the tenant it names
    (``sql/schema/edge_tenant_v1.sql``)."""

    # One edge per pair; its first column finds a parent's edges when the parent ends.
    pk = models.CompositePrimaryKey("parent_id", "child_id")
    org_id = models.UUIDField()
    parent_id = models.UUIDField()
    child_id = models.UUIDField()
    needs = models.CharField(max_length=10, choices=Needs.choices, default=Needs.DONE)

    class Meta:
        indexes = [
            # A child's parents in order: a callback reads its members page by page.
            models.Index(fields=["child_id", "parent_id"], name="dependency_child_idx")
        ]

    def __str__(self) -> str:
        return f"{self.child_id} after {self.parent_id} ({self.needs})"


class AttemptOutcome(models.TextChoices):
    # The handler returned; the item is done.
    DONE = "done", "Done"
    # The handler raised; another attempt follows after a delay.
    RETRIED = "retried", "Retried"
    # The handler raised a permanent error, or its attempts are spent: a dead letter.
    DEAD_LETTERED = "dead_lettered", "Dead-lettered"
    # Its holder went silent: the lease ran out and the sweep handed the item back (or, with its
    # attempts spent, dead-lettered it).
    LEASE_EXPIRED = "lease_expired", "Lease expired"
    # Its holder's process (or its liveness connection) was gone: the sweep's rescue handed the
    # item back before its lease ran out (or, with its attempts spent, dead-lettered it).
    HOLDER_GONE = "holder_gone", "Holder gone"


class Attempt(models.Model):
    """One claim of an item and how it ended: who ran it, where, from when to when, and what
    came of it (the error and its traceback, when it failed). Written by the statement that
    settles the claim (complete, fail, the sweep's requeue of an expired lease), never on its
    own; purged with its item. An attempt handed back without being spent (defer, release) is
    not one."""

    id = models.BigAutoField(primary_key=True)
    org_id = models.UUIDField()
    # The item's id: no foreign key, so a settle does not lock its item row again to check one;
    # the purge deletes an item's attempts in the statement that deletes the item.
    item_id = models.UUIDField()
    # The item's attempts count this claim made (a requeue by an operator starts again at 1).
    attempt = models.IntegerField()
    # The worker that held the claim (the item's claimed_by), and its host (the worker id's
    # first part: runworker's ids are host:pid:suffix).
    worker = models.CharField(max_length=200, blank=True, default="")
    host = models.CharField(max_length=200, blank=True, default="")
    # When the claim began and when the attempt ended, by the database's clock.
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(db_default=Now())
    outcome = models.CharField(max_length=20, choices=AttemptOutcome.choices)
    error = models.TextField(blank=True, default="")
    # The failure's traceback, its last 8,192 characters (workqueue.inputs.storable_traceback).
    traceback = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["item_id", "id"], name="attempt_item_idx")]

    def __str__(self) -> str:
        return f"attempt {self.attempt} of {self.item_id}: {self.outcome}"


class DeadLetter(WorkItem):
    """A failed work item as the admin's dead-letter list shows it: the same rows, read with
    ``status = 'failed'`` (a proxy: no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = "dead letter"


class StoredResponse(models.Model):
    """The answer the enqueue API gave to one request that carried an ``Idempotency-Key``: a
    retry with the same key and body gets it again instead of enqueueing twice.

    One per (tenant, user, key); written when the request claims the key (``status_code`` and
    ``body`` empty) and completed in the same transaction, so a concurrent retry waits for the
    first and then reads its answer. Purged after ``IDEMPOTENCY_KEY_RETENTION_S``.
    """

    id = models.UUIDField(primary_key=True, default=new_item_id, editable=False)
    org_id = models.UUIDField()
    # The signed-in user who sent the request (an actor): keys are theirs, not the tenant's.
    user_id = models.CharField(max_length=255)
    key = models.CharField(max_length=200)
    # sha256 of the method, path and canonical JSON body: a different body under the same key
    # is refused (422), never answered with another request's response.
    fingerprint = models.CharField(max_length=64)
    status_code = models.SmallIntegerField(null=True, blank=True)
    body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org_id", "user_id", "key"], name="storedresponse_one_per_key"
            )
        ]
        indexes = [models.Index(fields=["created_at"], name="storedresponse_created_idx")]

    def __str__(self) -> str:
        return f"{self.key} -> {self.status_code}"


class Mutex(models.Model):
    """A named lock only the system login can take: a row, locked ``FOR UPDATE`` for as long
    as its holder's transaction lasts (one sweeper at a time; a lane's claims in turn while
    caps are in effect). Not an advisory lock: any login may take any advisory lock, so the
    everyday login could hold one forever and stall every sweeper; it has no right on this
    table."""

    name = models.CharField(primary_key=True, max_length=200)

    def __str__(self) -> str:
        return self.name


# The operator's controls live beside (``controls.py``), a workflow's steps as declared
# (``workflows.py``) and the sweep's rollup of the attempts for the gauges page's charts
# (``minutes.py``), and the pending items as the claim finds them (``ready.py``); their models
# are the app's like these.
from workqueue.models.controls import Pause, RateBucket, RateLimit, TenantShare  # noqa: E402
from workqueue.models.minutes import KindMinute, LaneMinute, RollupState  # noqa: E402
from workqueue.models.ready import Ready  # noqa: E402
from workqueue.models.workflows import Callback, WorkflowStep  # noqa: E402

__all__ = [
    "NOT_DONE",
    "Attempt",
    "AttemptOutcome",
    "Callback",
    "DeadLetter",
    "Dependency",
    "KindMinute",
    "LaneMinute",
    "Mutex",
    "Needs",
    "Pause",
    "RateBucket",
    "RateLimit",
    "Ready",
    "RollupState",
    "Status",
    "StoredResponse",
    "TenantShare",
    "WorkItem",
    "WorkflowStep",
    "new_item_id",
]
