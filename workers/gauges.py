"""The queue's gauges for Prometheus: read in one statement per scrape, cached briefly.

Every process that serves ``/metrics`` (the web's, through django-prometheus, and each worker's
own endpoint) exports them from the default registry. One statement on the system login reads
the items by lane, kind and status, the outbox lag and the live workers (each part named in its
own app and embedded here); the result is kept for ``WORKQUEUE["GAUGES_CACHE_S"]``, and
concurrent scrapes share one read, so a scrape storm never becomes a query storm. Labels never
carry a tenant: one series per tenant would grow without bound, and ``/metrics`` carries no
tenant's data. The ten deepest tenants of each lane appear by rank only
(``workqueue_tenant_depth``); the admin's gauges page names them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from outbox.relay import READ_LAG
from workers.liveness import READ_WORKERS
from workqueue import api
from workqueue.maintenance import READ_GAUGES, READ_TOP_TENANTS
from workqueue.pauses import READ_PAUSES
from wqcore.conf import wq_settings
from wqcore.statements import Statement
from wqcore.store import System, execute

logger = logging.getLogger(__name__)


class QueueGaugesParams(NamedTuple):
    # The declared lanes (workqueue.lanes): items of any other lane are counted as one.
    lanes: list[str]
    # A worker whose last beat is older than this is not counted live.
    stale_after_s: float


QUEUE_GAUGES = Statement(
    "queue_gauges",
    QueueGaugesParams,
    directory=Path(__file__).with_name("sql"),
    includes=(READ_GAUGES, READ_TOP_TENANTS, READ_LAG, READ_WORKERS, READ_PAUSES),
)


@dataclass(frozen=True)
class QueueGauges:
    # One row per (lane, kind, status): items, oldest_age_s (pending rows only).
    items: list[dict[str, Any]] = field(default_factory=list)
    # Per lane, the ten tenants with the most pending items: lane, org_id, items, oldest_age_s,
    # rank (1 = deepest).
    top_tenants: list[dict[str, Any]] = field(default_factory=list)
    outbox_lag_s: float = 0.0
    outbox_pending: int = 0
    # state -> live workers
    workers: dict[str, int] = field(default_factory=dict)
    # The paused lanes and kinds: (lane, kind), kind '' for a whole lane.
    pauses: list[tuple[str, str]] = field(default_factory=list)

    @property
    def oldest_age_s(self) -> float:
        """Seconds the oldest due pending item has waited (0 when none waits)."""
        return max((r["oldest_age_s"] or 0.0 for r in self.items), default=0.0)

    @property
    def failed(self) -> int:
        return sum(r["items"] for r in self.items if r["status"] == api.Status.FAILED)


def read_queue_gauges() -> QueueGauges:
    """Read every gauge now, in one statement.

    Takes no tenant: the gauges describe the whole queue for the operator, so they read across
    tenants on the system login.
    """
    stale_after_s = float(wq_settings.GAUGES_WORKER_STALE_AFTER_S)
    params = QueueGaugesParams(api.declared_lanes(), stale_after_s)
    rows = execute(System(QUEUE_GAUGES, params))
    items, top, lag, workers, pauses = (json.loads(text) for text in rows.rows[0])
    return QueueGauges(
        items=items,
        top_tenants=top,
        outbox_lag_s=float(lag["oldest_s"]),
        outbox_pending=int(lag["pending"]),
        workers={w["state"]: int(w["workers"]) for w in workers},
        pauses=[(p["lane"], p["kind"]) for p in pauses],
    )


class CachedGauges:
    """``read_queue_gauges`` at most once per ``cache_s``; concurrent callers share a read."""

    def __init__(self, cache_s: float) -> None:
        self.cache_s = cache_s
        self.reads = 0
        self._lock = threading.Lock()
        self._value: QueueGauges | None = None
        self._read_at = float("-inf")

    def get(self) -> QueueGauges:
        with self._lock:
            if time.monotonic() - self._read_at >= self.cache_s or self._value is None:
                self._value = read_queue_gauges()
                self._read_at = time.monotonic()
                self.reads += 1
            return self._value

    def forget(self) -> None:
        with self._lock:
            self._read_at = float("-inf")


class QueueCollector(Collector):
    """Exports the queue's gauges on every ``/metrics`` of this process."""

    def __init__(self, gauges: CachedGauges) -> None:
        self.gauges = gauges

    def describe(self) -> list[Any]:
        return []  # read lazily: registering must not touch the database

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            families = list(self._families(self.gauges.get()))
        except Exception as exc:  # the scrape still answers; the queue's gauges are absent
            logger.warning("queue_gauges_unavailable error=%s", type(exc).__name__)
            return
        yield from families

    def _families(self, g: QueueGauges) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "workqueue_queue_oldest_age_seconds",
            "Seconds the oldest due pending item has waited.",
            value=g.oldest_age_s,
        )
        yield GaugeMetricFamily("workqueue_work_failed", "Dead letters (failed items).", g.failed)
        yield GaugeMetricFamily(
            "workqueue_records_parked", "Records parked by an entity (none park yet).", 0
        )
        yield GaugeMetricFamily(
            "workqueue_outbox_lag_seconds",
            "Seconds the oldest pending outbox row has waited.",
            value=g.outbox_lag_s,
        )
        yield GaugeMetricFamily(
            "workqueue_outbox_pending", "Outbox rows waiting for the relay.", g.outbox_pending
        )
        items = GaugeMetricFamily(
            "workqueue_items", "Items by lane, kind and status.", labels=["lane", "kind", "status"]
        )
        for row in g.items:
            items.add_metric([row["lane"], row["kind"], row["status"]], row["items"])
        yield items
        # The ten deepest tenants per lane, by rank: at most ten series per lane, never one per
        # tenant, and no tenant named (which tenant is which is the admin's gauges page).
        depth = GaugeMetricFamily(
            "workqueue_tenant_depth",
            "Pending items of the ten deepest tenants of each lane, by rank (1: deepest).",
            labels=["lane", "rank"],
        )
        age = GaugeMetricFamily(
            "workqueue_tenant_oldest_age_seconds",
            "Age of the oldest due item of the ten deepest tenants of each lane, by rank.",
            labels=["lane", "rank"],
        )
        for row in g.top_tenants:
            labels = [row["lane"], str(row["rank"])]
            depth.add_metric(labels, row["items"])
            age.add_metric(labels, row["oldest_age_s"] or 0.0)
        yield depth
        yield age
        workers = GaugeMetricFamily(
            "workqueue_workers_live",
            "Workers whose heartbeat is recent, by state.",
            labels=["state"],
        )
        for state in ("running", "draining"):
            workers.add_metric([state], g.workers.get(state, 0))
        yield workers
        yield _paused_family(g.pauses)


def _paused_family(pauses: list[tuple[str, str]]) -> GaugeMetricFamily:
    """1 for each paused lane (kind "") and kind, 0 for each declared lane not paused, so an
    alert can watch a lane left paused. Labels stay bounded: a lane no one declares counts as
    ``UNDECLARED``, a kind the registry does not know as "(unknown)"."""
    family = GaugeMetricFamily(
        "workqueue_lane_paused",
        '1 while a lane (kind "") or a kind in it is paused: its items are not claimed.',
        labels=["lane", "kind"],
    )
    declared, kinds = set(api.declared_lanes()), set(api.known_kinds())
    shown: set[tuple[str, str]] = set()
    for lane, kind in pauses:
        label = (
            lane if lane in declared else api.UNDECLARED,
            kind if not kind or kind in kinds else "(unknown)",
        )
        if label not in shown:
            shown.add(label)
            family.add_metric(list(label), 1)
    for lane in sorted(declared):
        if (lane, "") not in shown:
            family.add_metric([lane, ""], 0)
    return family


GAUGES = CachedGauges(cache_s=5.0)
_registered = False


def register() -> None:
    """Add the queue's gauges to the default registry, once per process."""
    global _registered
    if _registered:
        return
    GAUGES.cache_s = float(wq_settings.GAUGES_CACHE_S)
    REGISTRY.register(QueueCollector(GAUGES))
    _registered = True
