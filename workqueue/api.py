"""The work queue's public face: what views, workers, the sweep and the outbox relay call.

Every transition comes in a pair, one per face of the store (``workqueue/store.py``): the sync
one on Django's connections (joining the caller's transaction), the async one (``a...``) on the
store's own connections on the running event loop. Both run the same plan and the same named
statements. ``workers`` and other apps import from here, nothing deeper.
"""

from workqueue.claim import aclaim, claim, fail_orphaned
from workqueue.enqueue import (
    NewItem,
    Outcome,
    Relayed,
    aenqueue,
    aenqueue_many,
    enqueue,
    enqueue_many,
    enqueue_relayed,
    validated,
)
from workqueue.exceptions import Conflict, InvalidPayload, NotFound, WorkQueueError
from workqueue.fence import Fence
from workqueue.inputs import (
    check_lane,
    check_max_attempts,
    check_name,
    find_unstorable,
    storable_text,
)
from workqueue.kinds import Kind, Payload, get_kind, known_kinds, max_payload_bytes, register
from workqueue.maintenance import (
    Gauges,
    Requeued,
    arequeue_stale,
    maintenance_contexts,
    purge_items,
    read_gauges,
    requeue_stale,
    stale_tenants,
)
from workqueue.models import Status, WorkItem
from workqueue.rules import RetryPolicy, is_exhausted, retry_delay
from workqueue.settle import (
    acomplete,
    acomplete_many,
    adefer,
    aextend_lease,
    aextend_leases,
    afail,
    arelease,
    complete,
    complete_many,
    defer,
    extend_lease,
    extend_leases,
    fail,
    release,
)
from workqueue.statements import Statement
from workqueue.store import (
    AsyncStore,
    Plan,
    Rows,
    System,
    Tenant,
    aclose_async_store,
    arun,
    execute,
    run,
    use_async_store,
)

__all__ = [
    "AsyncStore",
    "Conflict",
    "Fence",
    "Gauges",
    "InvalidPayload",
    "Kind",
    "NewItem",
    "NotFound",
    "Outcome",
    "Payload",
    "Plan",
    "Relayed",
    "Requeued",
    "RetryPolicy",
    "Rows",
    "Statement",
    "Status",
    "System",
    "Tenant",
    "WorkItem",
    "WorkQueueError",
    "aclaim",
    "aclose_async_store",
    "acomplete",
    "acomplete_many",
    "adefer",
    "aenqueue",
    "aenqueue_many",
    "aextend_lease",
    "aextend_leases",
    "afail",
    "arelease",
    "arequeue_stale",
    "arun",
    "check_lane",
    "check_max_attempts",
    "check_name",
    "claim",
    "complete",
    "complete_many",
    "defer",
    "enqueue",
    "enqueue_many",
    "enqueue_relayed",
    "execute",
    "extend_lease",
    "extend_leases",
    "fail",
    "fail_orphaned",
    "find_unstorable",
    "get_kind",
    "is_exhausted",
    "known_kinds",
    "maintenance_contexts",
    "max_payload_bytes",
    "purge_items",
    "read_gauges",
    "register",
    "release",
    "requeue_stale",
    "retry_delay",
    "run",
    "stale_tenants",
    "storable_text",
    "use_async_store",
    "validated",
]
