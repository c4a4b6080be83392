"""The worker's Prometheus metrics (served on its metrics port beside /healthz)."""

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
HANDLER_SECONDS = Histogram(
    "workqueue_worker_handler_seconds",
    "Time a handler ran.",
    ["kind"],
    buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120),
)
IN_FLIGHT = Gauge("workqueue_worker_in_flight", "Items running now.")
RENEWALS_FAILED = Counter(
    "workqueue_worker_lease_renewals_failed_total", "Lease renewals that failed or timed out."
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
