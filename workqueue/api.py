"""The work queue's transitions in one place: what views, workers and the sweep call."""

from workqueue.claim import claim, fail_orphaned
from workqueue.enqueue import NewItem, Outcome, enqueue, enqueue_many
from workqueue.maintenance import (
    Gauges,
    Requeued,
    maintenance_contexts,
    purge_items,
    read_gauges,
    requeue_stale,
)
from workqueue.settle import (
    complete,
    complete_many,
    defer,
    extend_lease,
    extend_leases,
    fail,
    release,
)

__all__ = [
    "Gauges",
    "NewItem",
    "Outcome",
    "Requeued",
    "claim",
    "complete",
    "complete_many",
    "defer",
    "enqueue",
    "enqueue_many",
    "extend_lease",
    "extend_leases",
    "fail",
    "fail_orphaned",
    "maintenance_contexts",
    "purge_items",
    "read_gauges",
    "release",
    "requeue_stale",
]
