"""The worker's Prometheus metrics (served on its metrics port beside /healthz)."""

from bisect import bisect_left
from collections import Counter as Tally
from collections.abc import Iterable
from functools import cache
from typing import NamedTuple

from prometheus_client import Counter, Gauge, Histogram

CLAIMED = Counter("workqueue_worker_claimed_total", "Items claimed.", ["kind"])
COMPLETED = Counter("workqueue_worker_completed_total", "Items completed.", ["kind"])
RETRIED = Counter("workqueue_worker_retried_total", "Items failed and requeued.", ["kind"])
RELEASED = Counter("workqueue_worker_released_total", "Items handed back.", ["kind", "reason"])
CANCELLED = Counter(
    "workqueue_worker_cancelled_total", "Running items cancelled.", ["kind", "reason"]
)
TIMED_OUT = Counter(
    "workqueue_worker_timed_out_total",
    "Handlers cancelled past their kind's time limit (the item failed as TimeoutError).",
    ["kind"],
)
ABANDONED_THREADS = Gauge(
    "workqueue_worker_abandoned_threads",
    "Handler threads still running after their item was cancelled (a thread cannot be "
    "stopped): each keeps its slot of the capacity until it returns.",
)
HANDLER_SECONDS = Histogram(
    "workqueue_worker_handler_seconds",
    "Time a handler ran (the run time of each attempt), by kind.",
    ["kind"],
    buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120),
)
# From the claimed rows themselves (the claim's now() minus the item's available_at, both the
# database's clock): no statement of its own, no clock skew between hosts.
WAIT_SECONDS = Histogram(
    "workqueue_worker_wait_seconds",
    "Time an item waited from due (available_at) to its claim, by lane and kind.",
    ["lane", "kind"],
    buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800, 3600),
)
# livesum: a process that imports this under a multiprocess web shows one sum, not a series
# per process id.
IN_FLIGHT = Gauge("workqueue_worker_in_flight", "Items running now.", multiprocess_mode="livesum")
RENEWALS_FAILED = Counter(
    "workqueue_worker_lease_renewals_failed_total", "Lease renewals that failed or timed out."
)
LOOP_BLOCKED = Counter(
    "workqueue_worker_loop_blocked_total",
    "Times the worker's event loop did not run for WORKER_LOOP_BLOCKED_WARN_S or longer "
    "(an async handler blocking it: sync work belongs in a sync handler or run.in_thread).",
)
LOOP_BLOCKED_SECONDS = Histogram(
    "workqueue_worker_loop_blocked_seconds",
    "How long the event loop stayed blocked, each time it was blocked that long.",
    buckets=(0.5, 1, 2, 5, 10, 30, 60, 300),
)
PROGRESS_WRITES = Counter(
    "workqueue_worker_progress_writes_total",
    "Running items' progress and metadata written to their rows (run.progress, run.set_meta): "
    "at most one per item per WORKER_PROGRESS_FLUSH_S, and its last before its outcome.",
)
LIVENESS_PUBLISH_FAILED = Counter(
    "workqueue_worker_liveness_publish_failed_total", "Heartbeats that could not be published."
)


class KindMetrics(NamedTuple):
    claimed: Counter
    completed: Counter
    retried: Counter
    handler_seconds: Histogram


@cache
def for_kind(kind: str) -> KindMetrics:
    """The per-kind children, looked up once: ``labels()`` on every item costs more than the
    increment itself."""
    return KindMetrics(
        CLAIMED.labels(kind),
        COMPLETED.labels(kind),
        RETRIED.labels(kind),
        HANDLER_SECONDS.labels(kind),
    )


@cache
def waited(lane: str, kind: str) -> Histogram:
    """The wait histogram's child for a lane and kind, looked up once."""
    return WAIT_SECONDS.labels(lane, kind)


def observe_many(histogram: Histogram, values: Iterable[float]) -> None:
    """``histogram.observe`` each of ``values``, adding to each bucket and to the sum once, not
    once per value: a claim observes a hundred waits, and each observe takes the value's lock
    twice. Per value where the client's histogram is not laid out as this expects."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    values = list(values)
    if bounds is None or buckets is None or total is None or len(bounds) != len(buckets):
        for value in values:
            histogram.observe(value)
        return
    # observe's rule: the first bucket whose upper bound is at least the value.
    for i, n in Tally(bisect_left(bounds, value) for value in values).items():
        buckets[i].inc(n)
    total.inc(sum(values))
