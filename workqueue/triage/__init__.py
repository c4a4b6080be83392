"""Triage: what an operator does with dead letters: requeue them (now or after a delay),
discard them, or edit a payload and requeue it; one by one as a page drew them, or every one a
filter matches.

As drawn (``requeue``, ``discard``): each is one statement under the items' tenant (row-level
security applies), fenced on what the operator saw: the item's status and ``updated_at`` as the
confirmation page drew them (``Drawn``). An item that changed since (claimed, completed,
requeued or discarded by someone else) matches nothing and is left as it is; the result names
it. Each statement appends an audit entry per item naming the operator and keeping what the item
had (error, attempts, payload), and the requeues announce their lanes on ``work_available``.
Bounded: at most ``MAX_BATCH`` items per call.

Dry run (``dry_run``): a dead letter's handler run once in a transaction always rolled back,
reporting what it would write, emit, enqueue and mail, before the operator requeues it.

By filter (``matching``: which dead letters a filter means, grouped and counted; ``by_filter``:
requeue or discard them all), fenced on the moment the operator confirmed.
"""

from workqueue.triage.by_filter import (
    Progress,
    Swept,
    act_on_every_match,
    act_on_matching,
)
from workqueue.triage.discard import discard
from workqueue.triage.drawn import MAX_BATCH, Drawn, Triaged
from workqueue.triage.matching import (
    ERROR_CONTAINS_MAX,
    SCAN_MAX,
    Counted,
    DeadFilter,
    Grouped,
    count_dead,
    group_dead,
    parse_since,
    read_lanes,
)
from workqueue.triage.requeue import requeue_dead, requeue_edited

__all__ = [
    "ERROR_CONTAINS_MAX",
    "MAX_BATCH",
    "SCAN_MAX",
    "Counted",
    "DeadFilter",
    "Drawn",
    "Grouped",
    "Progress",
    "Swept",
    "Triaged",
    "act_on_every_match",
    "act_on_matching",
    "count_dead",
    "discard",
    "group_dead",
    "parse_since",
    "read_lanes",
    "requeue_dead",
    "requeue_edited",
]
