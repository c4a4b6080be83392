"""What the runtime calls: the workers, the sweep, the outbox relay and the site's set-up.

The claim and everything its holder does with an item (settle, extend, give back), the
maintenance transitions (requeue, purge), the figures behind the gauges and the dashboard, the
handler registry and the checks a process runs before it starts. It includes the site's face
(``workqueue.api``). Like procrastinate's ``JobManager``, one place for every operation the
runtime runs on the queue: nothing outside ``workqueue`` imports its other modules. A test
checks that every name here is used outside ``workqueue``.
"""

from workqueue import api as _site
from workqueue.api import *  # noqa: F403  (the site's face is part of this one)
from workqueue.cancel import acancel_held
from workqueue.checks import refuse_unsafe_start, set_unreachable_hint, startup_problem
from workqueue.claim import Claimed, aclaim, claim_first
from workqueue.enqueue import Relayed, enqueue_relayed, validated
from workqueue.erase import register_tenant_table
from workqueue.fence import Fence
from workqueue.figures import (
    DueKind,
    DueLane,
    Holder,
    read_due_kinds,
    read_due_lanes,
    read_gauges_of,
    read_holders,
)
from workqueue.handlers import (
    Handler,
    failure_of,
    handled_by,
    handled_kinds,
    handler_for,
    is_async,
    is_failure,
    needs_threads,
    time_limit,
)
from workqueue.history import (
    READ_HISTORY,
    drop_history,
    keep_history,
    move_history,
    move_timed_history,
)
from workqueue.idempotency import purge_request_keys
from workqueue.inputs import (
    PAYLOAD_DEPTH_MAX,
    SCHEDULE_KEY_PREFIX,
    check_lane,
    check_max_attempts,
    check_name,
    check_traceparent,
    find_unstorable,
    storable_text,
    too_deep,
)
from workqueue.kinds import MAX_TIMEOUT_S, get_kind, known_kinds, max_payload_bytes
from workqueue.lanes import UNDECLARED, declare_lanes, declared_lanes, is_declared
from workqueue.maintenance import (
    READ_GAUGES,
    READ_TOP_TENANTS,
    Gauges,
    Requeued,
    autovacuum_on,
    purge_items,
    read_top_tenants,
    requeue_held,
    requeue_stale,
    stale_tenants,
)
from workqueue.minutes import (
    UNKNOWN_KIND,
    WAIT_BOUNDS_S,
    KeptMinutes,
    KindMinutes,
    KindSpan,
    Minutes,
    RolledUp,
    Span,
    keep_minutes,
    quantile,
    read_kind_minutes,
    read_minutes,
    read_rollup_place,
    roll_up_minutes,
)
from workqueue.models import Attempt, AttemptOutcome, TenantShare, new_item_id
from workqueue.pauses import READ_PAUSES, SITE_ORG_ID, Paused, read_pauses
from workqueue.progress import Report, Reported, awrite_progress, check_meta, check_progress
from workqueue.rate_limits import (
    READ_RATE_LIMITS,
    LimitState,
    purge_rate_buckets,
    read_rate_limits,
)
from workqueue.ready import Rotated, arotate_ready, bring_forward, rotate_ready
from workqueue.results import result_json
from workqueue.rules import is_exhausted, retry_delay
from workqueue.settle import (
    Completed,
    acomplete_many,
    adefer,
    aextend_leases,
    afail,
    arelease,
)
from workqueue.signals import asend_settled, log_receiver_failures, send_settled, work_enqueued
from workqueue.views import json_error

__all__ = [
    "MAX_TIMEOUT_S",
    "PAYLOAD_DEPTH_MAX",
    "READ_GAUGES",
    "READ_HISTORY",
    "READ_PAUSES",
    "READ_RATE_LIMITS",
    "READ_TOP_TENANTS",
    "SCHEDULE_KEY_PREFIX",
    "SITE_ORG_ID",
    "UNDECLARED",
    "UNKNOWN_KIND",
    "WAIT_BOUNDS_S",
    "Attempt",
    "AttemptOutcome",
    "Claimed",
    "Completed",
    "DueKind",
    "DueLane",
    "Fence",
    "Gauges",
    "Handler",
    "Holder",
    "KeptMinutes",
    "KindMinutes",
    "KindSpan",
    "LimitState",
    "Minutes",
    "Paused",
    "Relayed",
    "Report",
    "Reported",
    "Requeued",
    "RolledUp",
    "Rotated",
    "Span",
    "TenantShare",
    "acancel_held",
    "aclaim",
    "acomplete_many",
    "adefer",
    "aextend_leases",
    "afail",
    "arelease",
    "arotate_ready",
    "asend_settled",
    "autovacuum_on",
    "awrite_progress",
    "bring_forward",
    "check_lane",
    "check_max_attempts",
    "check_meta",
    "check_name",
    "check_progress",
    "check_traceparent",
    "claim_first",
    "declare_lanes",
    "declared_lanes",
    "drop_history",
    "enqueue_relayed",
    "failure_of",
    "find_unstorable",
    "get_kind",
    "handled_by",
    "handled_kinds",
    "handler_for",
    "is_async",
    "is_declared",
    "is_exhausted",
    "is_failure",
    "json_error",
    "keep_history",
    "keep_minutes",
    "known_kinds",
    "log_receiver_failures",
    "max_payload_bytes",
    "move_history",
    "move_timed_history",
    "needs_threads",
    "new_item_id",
    "purge_items",
    "purge_rate_buckets",
    "purge_request_keys",
    "quantile",
    "read_due_kinds",
    "read_due_lanes",
    "read_gauges_of",
    "read_holders",
    "read_kind_minutes",
    "read_minutes",
    "read_pauses",
    "read_rate_limits",
    "read_rollup_place",
    "read_top_tenants",
    "refuse_unsafe_start",
    "register_tenant_table",
    "requeue_held",
    "requeue_stale",
    "result_json",
    "retry_delay",
    "roll_up_minutes",
    "rotate_ready",
    "send_settled",
    "set_unreachable_hint",
    "stale_tenants",
    "startup_problem",
    "storable_text",
    "time_limit",
    "too_deep",
    "validated",
    "work_enqueued",
]
__all__ += _site.__all__
