"""The queue's gauges for Prometheus: read in one statement per scrape, cached briefly.

They describe the database, not a process, so exactly one endpoint exports them: the web's
``/metrics/queue`` (``workers/urls.py``, which a site includes; or ``registry()`` served where
it likes). Workers export only their own counters, and the web's ``/metrics``
only its own, so a ``sum()`` across processes is right (docs/howto/metrics.md). One statement on the
system login reads the items by lane, kind and status, the outbox lag and the live workers
(each part named in its own app and embedded here); the result is kept for
``WORKQUEUE["GAUGES_CACHE_S"]``, and concurrent scrapes share one read, so a scrape storm
never becomes a query storm. Labels never carry a tenant: one series per tenant would grow
without bound, and ``/metrics`` carries no tenant's data. The ten deepest tenants of each lane
appear by rank only (``workqueue_tenant_depth``); the admin's gauges page names them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from outbox.api import READ_LAG
from workers.liveness import READ_LIVE_KINDS, READ_LIVE_LANES, READ_WORKERS
from workers.schedule_state import READ_SCHEDULE_GAUGES
from workers.schedules import all_schedules
from workqueue import runtime
from workqueue.runtime import READ_GAUGES, READ_PAUSES, READ_RATE_LIMITS, READ_TOP_TENANTS
from wqcore.conf import wq_settings
from wqcore.logs import log_event
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
    includes=(
        READ_GAUGES,
        READ_TOP_TENANTS,
        READ_LAG,
        READ_WORKERS,
        READ_SCHEDULE_GAUGES,
        READ_LIVE_LANES,
        READ_LIVE_KINDS,
        READ_PAUSES,
        READ_RATE_LIMITS,
        runtime.READ_HISTORY,
    ),
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
    # One row per schedule state: name, last_tick_s (epoch seconds, None before its first
    # item), skipped, enqueued, paused, now_s (the database's clock).
    schedules: list[dict[str, Any]] = field(default_factory=list)
    # The lanes live workers serve (an undeclared one as ``runtime.UNDECLARED``, as items count).
    served_lanes: set[str] = field(default_factory=set)

    @property
    def unserved_lanes(self) -> dict[str, bool]:
        """Every declared lane, and any other lane with due work: whether it has due pending
        items and no live worker serving it."""
        due = {
            r["lane"]
            for r in self.items
            if r["status"] == "pending" and r["oldest_age_s"] is not None
        }
        lanes = set(runtime.declared_lanes()) | due
        return {lane: lane in due and lane not in self.served_lanes for lane in sorted(lanes)}

    # The (lane, kind) pairs live workers serve (lanes as in ``served_lanes``).
    served_kinds: set[tuple[str, str]] = field(default_factory=set)

    @property
    def unserved_kinds(self) -> dict[tuple[str, str], bool]:
        """Every registered kind in its own lane, and any (lane, kind) with due work: whether
        it has due pending items and no live worker serving that kind in that lane (a lane
        served for other kinds still leaves this one waiting)."""
        due = {
            (r["lane"], r["kind"])
            for r in self.items
            if r["status"] == "pending" and r["oldest_age_s"] is not None
        }
        declared = set(runtime.declared_lanes())
        lanes = {name: runtime.get_kind(name).lane for name in runtime.known_kinds()}
        own = {(lane if lane in declared else runtime.UNDECLARED, k) for k, lane in lanes.items()}
        return {pair: pair in due and pair not in self.served_kinds for pair in sorted(own | due)}

    # The paused lanes and kinds: (lane, kind), kind '' for a whole lane.
    pauses: list[tuple[str, str]] = field(default_factory=list)
    # One row per rate limit: id, scope, target, used (of its burst, by the busiest bucket
    # now), blocked (buckets that allow nothing now).
    rate_limits: list[dict[str, Any]] = field(default_factory=list)
    # History (workqueue/history.py): its spans, and their items and bytes as last counted.
    history: dict[str, int] = field(default_factory=dict)

    @property
    def oldest_age_s(self) -> float:
        """Seconds the oldest due pending item has waited (0 when none waits)."""
        return max((r["oldest_age_s"] or 0.0 for r in self.items), default=0.0)

    def oldest_age_by_lane(self, lanes: list[str]) -> dict[str, float]:
        """Per lane (each of ``lanes``, and any other with items), the oldest due pending
        item's wait in seconds (0 when none waits)."""
        ages = dict.fromkeys(lanes, 0.0)
        for row in self.items:
            ages[row["lane"]] = max(ages.get(row["lane"], 0.0), row["oldest_age_s"] or 0.0)
        return ages

    @property
    def failed(self) -> int:
        return sum(r["items"] for r in self.items if r["status"] == runtime.Status.FAILED)


def read_queue_gauges() -> QueueGauges:
    """Read every gauge now, in one statement.

    Takes no tenant: the gauges describe the whole queue for the operator, so they read across
    tenants on the system login.
    """
    stale_after_s = wq_settings.GAUGES_WORKER_STALE_AFTER_S
    params = QueueGaugesParams(runtime.declared_lanes(), stale_after_s)
    rows = execute(System(QUEUE_GAUGES, params))
    items, top, lag, workers, schedules, lanes, kinds, pauses, limits, history = (
        json.loads(text) for text in rows.rows[0]
    )
    declared = set(params.lanes)
    return QueueGauges(
        items=items,
        top_tenants=top,
        outbox_lag_s=float(lag["oldest_s"]),
        outbox_pending=int(lag["pending"]),
        workers={w["state"]: int(w["workers"]) for w in workers},
        schedules=schedules,
        served_lanes={lane if lane in declared else runtime.UNDECLARED for lane in lanes},
        served_kinds={
            (lane if lane in declared else runtime.UNDECLARED, kind) for lane, kind in kinds
        },
        pauses=[(p["lane"], p["kind"]) for p in pauses],
        rate_limits=limits,
        history={name: int(value) for name, value in history.items()},
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
    """The queue's gauges, read when scraped."""

    def __init__(
        self, gauges: CachedGauges, lanes: Callable[[], list[str]] = runtime.declared_lanes
    ):
        self.gauges = gauges
        self.lanes = lanes

    def describe(self) -> list[Any]:
        return []  # read lazily: registering must not touch the database

    def collect(self) -> Iterator[Metric]:
        try:
            families = list(self._families(self.gauges.get()))
        except Exception as exc:  # the scrape still answers; the queue's gauges are absent
            log_event(logger, logging.WARNING, "queue_gauges_unavailable", error=type(exc).__name__)
            return
        yield from families

    def _families(self, g: QueueGauges) -> Iterator[Metric]:
        oldest = GaugeMetricFamily(
            "workqueue_queue_oldest_age_seconds",
            "Seconds the oldest due pending item of each lane has waited (max() for the queue).",
            labels=["lane"],
        )
        for lane, age_s in sorted(g.oldest_age_by_lane(self.lanes()).items()):
            oldest.add_metric([lane], age_s)
        yield oldest
        yield GaugeMetricFamily("workqueue_work_failed", "Dead letters (failed items).", g.failed)
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
        yield from _history_families(g)
        yield from _tenant_families(g)
        yield from _worker_families(g)
        yield _paused_family(g.pauses)
        yield from _rate_limit_families(g.rate_limits)
        yield from _schedule_families(g)


def _history_families(g: QueueGauges) -> Iterator[Metric]:
    """History's size from the statistics (no scan): spans kept, done items and bytes in them."""
    yield GaugeMetricFamily(
        "workqueue_history_spans", "Spans of history kept.", g.history.get("spans", 0)
    )
    yield GaugeMetricFamily(
        "workqueue_history_items",
        "Done items in history, as the statistics last counted them (workqueue_items counts the "
        "hot table).",
        g.history.get("items", 0),
    )
    yield GaugeMetricFamily(
        "workqueue_history_bytes",
        "Bytes of history's tables (items, attempts, task records).",
        g.history.get("bytes", 0),
    )


def _tenant_families(g: QueueGauges) -> Iterator[Metric]:
    """The ten deepest tenants per lane, by rank: at most ten series per lane, never one per
    tenant, and no tenant named (which tenant is which is the admin's gauges page)."""
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


def _worker_families(g: QueueGauges) -> Iterator[Metric]:
    """The live workers by state, and the lanes with due work that none serves."""
    workers = GaugeMetricFamily(
        "workqueue_workers_live",
        "Workers whose heartbeat is recent, by state.",
        labels=["state"],
    )
    for state in ("running", "draining", "stopping"):
        workers.add_metric([state], g.workers.get(state, 0))
    yield workers
    unserved = GaugeMetricFamily(
        "workqueue_lane_unserved",
        "1 when a lane has due pending items and no live worker serves it, else 0.",
        labels=["lane"],
    )
    for lane, flagged in g.unserved_lanes.items():
        unserved.add_metric([lane], 1 if flagged else 0)
    yield unserved
    unserved_kind = GaugeMetricFamily(
        "workqueue_kind_unserved",
        "1 when a kind has due pending items in a lane and no live worker of that lane serves "
        "the kind, else 0.",
        labels=["lane", "kind"],
    )
    for (lane, kind), flagged in g.unserved_kinds.items():
        unserved_kind.add_metric([lane, kind], 1 if flagged else 0)
    yield unserved_kind


def _schedule_families(g: QueueGauges) -> Iterator[Metric]:
    """Each declared schedule's last enqueued tick, next tick, skipped and enqueued ticks, and
    whether it is paused (a schedule declared but not swept yet shows zeros and no next tick)."""
    rows = {row["name"]: row for row in g.schedules}
    last = GaugeMetricFamily(
        "workqueue_schedule_last_tick_timestamp_seconds",
        "The tick of the schedule's latest enqueued items (Unix time; 0: none yet).",
        labels=["schedule"],
    )
    upcoming = GaugeMetricFamily(
        "workqueue_schedule_next_tick_timestamp_seconds",
        "The schedule's next tick (Unix time), unless it is paused.",
        labels=["schedule"],
    )
    skipped = CounterMetricFamily(
        "workqueue_schedule_skipped",
        "Ticks that came due while no sweeper ran (or whose item was refused), never enqueued.",
        labels=["schedule"],
    )
    enqueued = CounterMetricFamily(
        "workqueue_schedule_enqueued",
        "Ticks enqueued (each for every tenant the schedule serves).",
        labels=["schedule"],
    )
    paused = GaugeMetricFamily(
        "workqueue_schedule_paused",
        "1 while an operator has the schedule paused.",
        labels=["schedule"],
    )
    for schedule in all_schedules():
        row = rows.get(schedule.name, {})
        labels = [schedule.name]
        last.add_metric(labels, row.get("last_tick_s") or 0.0)
        skipped.add_metric(labels, row.get("skipped", 0))
        enqueued.add_metric(labels, row.get("enqueued", 0))
        paused.add_metric(labels, 1 if row.get("paused") else 0)
        if row and not row["paused"]:
            now = datetime.fromtimestamp(row["now_s"], UTC)
            upcoming.add_metric(labels, schedule.next_tick(now).timestamp())
    yield from (last, upcoming, skipped, enqueued, paused)


def _rate_limit_families(limits: list[dict[str, Any]]) -> Iterator[Metric]:
    """Per rate limit, how much of its burst its busiest bucket has spent now and how many of
    its buckets allow nothing now. A tenant's limit is labelled by the limit's id, never the
    tenant's (which tenant: the admin's gauges page)."""
    labels = ["scope", "target"]
    spent = GaugeMetricFamily(
        "workqueue_rate_limit_spent",
        "How much of the limit's burst its busiest bucket has spent now.",
        labels=labels,
    )
    blocked = GaugeMetricFamily(
        "workqueue_rate_limit_blocked_buckets",
        "The limit's buckets that allow nothing now (their items wait).",
        labels=labels,
    )
    for row in limits:
        named_tenant = row["scope"] == "tenant" and row["target"] != "*"
        label = [row["scope"], f"limit {row['id']}" if named_tenant else row["target"]]
        spent.add_metric(label, row["used"])
        blocked.add_metric(label, row["blocked"])
    yield spent
    yield blocked


def _paused_family(pauses: list[tuple[str, str]]) -> GaugeMetricFamily:
    """1 for each paused lane (kind "") and kind, 0 for each declared lane not paused, so an
    alert can watch a lane left paused. Labels stay bounded: a lane no one declares counts as
    ``UNDECLARED``, a kind the registry does not know as "(unknown)"."""
    family = GaugeMetricFamily(
        "workqueue_lane_paused",
        '1 while a lane (kind "") or a kind in it is paused: its items are not claimed.',
        labels=["lane", "kind"],
    )
    declared, kinds = set(runtime.declared_lanes()), set(runtime.known_kinds())
    shown: set[tuple[str, str]] = set()
    for lane, kind in pauses:
        label = (
            lane if lane in declared else runtime.UNDECLARED,
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
_registry: CollectorRegistry | None = None


def registry() -> CollectorRegistry:
    """A registry of the queue's gauges alone (not the process's default one, which a
    process's own metrics fill): what the one exporting endpoint serves."""
    global _registry
    if _registry is None:
        GAUGES.cache_s = wq_settings.GAUGES_CACHE_S
        made = CollectorRegistry(auto_describe=False)
        made.register(QueueCollector(GAUGES))
        _registry = made
    return _registry
