"""Prometheus counters of the queue's transitions (the worker adds its own beside these)."""

from prometheus_client import Counter

DEAD_LETTERED = Counter(
    "workqueue_dead_lettered_total", "Items failed for good (dead letters).", ["kind"]
)
ORPHANED = Counter(
    "workqueue_orphaned_total", "Claimed items failed because their tenant is gone.", ["kind"]
)
STALE_WRITES = Counter(
    "workqueue_stale_writes_refused_total",
    "Writes refused because the writer no longer held the claim token.",
    ["transition"],
)
