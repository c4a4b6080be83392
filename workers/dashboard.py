"""The admin's queue gauges page: depth, oldest waiting age, dead letters, outbox lag, live
workers and what they hold, and charts of the last hour or day (``charts.py``: attempts per
minute, the wait before a claim, pending by lane, from the sweep's rollup of the attempts).

The operator's page reads the whole site on the system login; a tenant's staff get the same
page computed from their tenant's rows only, under row-level security (``workqueue.figures``):
no other tenant's count, and no worker list (workers serve every tenant), only the workers
holding this tenant's items.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from audit.api import actor_names
from outbox.api import READ_LAG, Lag
from tenancy.admin_fence import may_act, sees_every_tenant, tenant_staff
from tenancy.modes import current_tenancy, has_tenants
from workers import schedule_state
from workers.charts import WINDOWS, Chart, Links, charts, kind_charts, spans_of
from workers.liveness import read_live_kind_lanes, read_live_lanes
from workers.models import Worker, WorkerState
from workers.schedules import all_schedules, site_tenant
from workqueue import runtime
from wqcore.conf import system_alias, wq_settings
from wqcore.statements import NoParams
from wqcore.store import System, Tenant, execute

# A worker whose last heartbeat is older than this is shown as silent (its process may be gone;
# the sweep hands its items back once their leases run out).
SILENT_AFTER_S = 60
# The rollup is behind when it has not caught up with the attempts for this long (the sweep runs
# every few seconds: it is not running, or cannot keep up).
ROLLUP_LATE_S = 120


@dataclass(frozen=True)
class TenantRow:
    """One of a lane's ten deepest tenants, with its share of the fair claim."""

    lane: str
    rank: int
    org: str
    items: int
    oldest_age_s: float
    weight: float
    max_in_flight: int | None  # None: no cap


@dataclass(frozen=True)
class WorkerRow:
    worker: Worker
    beat_age_s: float
    silent: bool
    holds: int


@dataclass(frozen=True)
class ScheduleRow:
    """One declared schedule as the page shows it."""

    name: str
    kind: str
    rule: str
    tenant: str  # "site" or "each"
    paused: bool
    last_tick: datetime | None  # the latest enqueued tick
    next_tick: datetime | None  # None while paused
    skipped: int
    enqueued: int


@dataclass(frozen=True)
class ChartsView:
    """The charts of one window (``WINDOWS``: "hour" or "day") and lane (None: every lane)."""

    window: str
    lane: str | None
    lanes: list[str]
    charts: list[Chart]
    # Attempts done in the window (the card), when the window began, and when the rollup last
    # caught up with the attempts (None: never) and whether that is long ago.
    done: int
    since: datetime
    rolled_up_at: datetime | None
    late: bool


@dataclass
class Panel:
    scope: str
    gauges: runtime.Gauges
    lag: Lag
    charts: ChartsView
    holders: list[runtime.Holder]
    workers: list[WorkerRow] | None  # None: not shown (a tenant's page)
    by_status: dict[str, int] = field(default_factory=dict)
    by_lane: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)
    # (lane, kind, [(status, count) per status, in ``statuses`` order])
    depth: list[tuple[str, str, list[tuple[str, int]]]] = field(default_factory=list)
    # The ten deepest tenants of each lane (the operator's page only).
    top_tenants: list[TenantRow] = field(default_factory=list)
    # The declared schedules: every one for the operator; a tenant's staff see those that
    # enqueue for their tenant.
    schedules: list[ScheduleRow] = field(default_factory=list)
    # The lanes with due work and no live worker serving them (``unserved``).
    unserved: list[runtime.DueLane] = field(default_factory=list)
    # The kinds with due work in a lane that live workers serve, though none of them serves
    # the kind (``unserved_kinds``).
    unserved_kinds: list[runtime.DueKind] = field(default_factory=list)
    # The paused lanes and kinds (the site's: every page shows them; who paused them, the
    # operator's only).
    pauses: list[runtime.Paused] = field(default_factory=list)
    rate_limits: list[runtime.LimitState] = field(default_factory=list)

    @property
    def statuses(self) -> list[str]:
        return list(runtime.Status.values)

    @property
    def status_counts(self) -> list[int]:
        return [self.by_status.get(status, 0) for status in self.statuses]

    @property
    def status_pairs(self) -> list[tuple[str, int]]:
        """(status, count) in ``statuses`` order: each count links to its filtered list."""
        return list(zip(self.statuses, self.status_counts, strict=True))


def _lag(org_id: uuid.UUID | None) -> Lag:
    """The outbox's lag: every tenant's (system login), or one tenant's under its row-level
    security (the same statement)."""
    step = System(READ_LAG, NoParams()) if org_id is None else Tenant(org_id, READ_LAG, NoParams())
    oldest, pending = execute(step).rows[0]
    return Lag(float(oldest), int(pending))


def _workers(holders: list[runtime.Holder]) -> list[WorkerRow]:
    """The workers that have not gone offline, newest heartbeat first, with what each holds.
    The workers table belongs to no tenant: the operator's page only, on the system login."""
    holds = {h.claimed_by: h.items for h in holders}
    now = timezone.now()
    rows = []
    live = Worker.objects.using(system_alias()).exclude(state=WorkerState.OFFLINE)
    for worker in live.order_by("-last_beat_at")[:100]:
        beat_age = (now - worker.last_beat_at).total_seconds()
        rows.append(WorkerRow(worker, beat_age, beat_age > SILENT_AFTER_S, holds.get(worker.id, 0)))
    return rows


def _top_tenants() -> list[TenantRow]:
    """Each lane's ten deepest tenants, by name, with their weight and cap: who the fair claim
    is sharing out between. Across tenants: the operator's page only, system login."""
    rows = runtime.read_top_tenants()
    org_ids = {row.org_id for row in rows}
    names = current_tenancy().tenant_names(org_ids)
    shares = {
        s.org_id: s
        for s in runtime.TenantShare.objects.using(system_alias()).filter(org_id__in=org_ids)
    }
    default_cap = wq_settings.MAX_IN_FLIGHT
    found = []
    for row in rows:
        share = shares.get(row.org_id)
        cap = share.max_in_flight if share and share.max_in_flight is not None else default_cap
        found.append(
            TenantRow(
                row.lane,
                row.rank,
                names.get(row.org_id, str(row.org_id)),
                row.items,
                row.oldest_age_s,
                share.weight if share else 1.0,
                cap,
            )
        )
    return sorted(found, key=lambda r: (r.lane, r.rank))


def _schedules(org_id: uuid.UUID | None) -> list[ScheduleRow]:
    """The declared schedules with their state, next ticks by the database's clock. The state
    rows belong to no tenant (system login); a tenant's page lists the schedules of every
    tenant and the site's when the site's tenant is theirs, and nothing else."""
    declared = all_schedules()
    if not declared:
        return []
    now, states = schedule_state.read_states()
    rows = []
    for schedule in declared:
        if org_id is not None and schedule.tenant is None and site_tenant() != org_id:
            continue
        state = states.get(schedule.name)
        paused = state is not None and state.paused
        rows.append(
            ScheduleRow(
                schedule.name,
                schedule.kind,
                schedule.rule,
                schedule.tenant or "site",
                paused,
                state.last_enqueued_tick if state else None,
                None if paused else schedule.next_tick(now),
                state.skipped if state else 0,
                state.enqueued if state else 0,
            )
        )
    return rows


def unserved(org_id: uuid.UUID | None) -> list[runtime.DueLane]:
    """The lanes with due pending items (every tenant's, or ``org_id``'s under its row-level
    security) that no live worker serves: a worker row not offline, beating within
    ``GAUGES_WORKER_STALE_AFTER_S``, of that lane (read on the system login: the workers table
    belongs to no tenant and says nothing of one)."""
    due = runtime.read_due_lanes(org_id)
    if not due:
        return []
    live = read_live_lanes(wq_settings.GAUGES_WORKER_STALE_AFTER_S)
    return [lane for lane in due if lane.lane not in live]


def unserved_kinds(org_id: uuid.UUID | None) -> list[runtime.DueKind]:
    """The kinds with due pending items (every tenant's, or ``org_id``'s under its row-level
    security) in a lane some live worker serves, though none serves the kind there: the workers
    were started with a list of kinds that leaves it out. A lane no live worker serves at all is
    ``unserved``'s, and its kinds are not listed again (what ``workqueue_kind_unserved`` flags,
    less those lanes)."""
    due = runtime.read_due_kinds(org_id)
    if not due:
        return []
    live = read_live_kind_lanes(wq_settings.GAUGES_WORKER_STALE_AFTER_S)
    lanes = {lane for lane, _kind in live}
    return [d for d in due if d.lane in lanes and (d.lane, d.kind) not in live]


def read_charts(
    org_id: uuid.UUID | None, window: str = "hour", lane: str | None = None
) -> ChartsView:
    """The charts of ``window`` from the queue's minutes: every tenant's (``None``) or one
    tenant's, under its row-level security; every lane's, or ``lane``'s."""
    window = window if window in WINDOWS else "hour"
    bin_s, bins = WINDOWS[window]
    minutes = runtime.read_minutes(bin_s, bins, org_id=org_id)
    rolled_up_at, now = runtime.read_rollup_place()
    lanes = sorted(set(minutes.lanes) | set(runtime.declared_lanes()))
    lane = lane if lane in lanes else None
    since = minutes.starts[0]
    kinds = runtime.read_kind_minutes(bin_s, bins, org_id=org_id)
    drawn = [
        *charts(minutes, Links(since, lane), lane),
        *kind_charts(kinds, Links(since, lane), lane),
    ]
    done = sum(span.done for span in spans_of(minutes, lane))
    late = rolled_up_at is None or (now - rolled_up_at).total_seconds() > ROLLUP_LATE_S
    return ChartsView(window, lane, lanes, drawn, done, since, rolled_up_at, late)


def _named_pauses() -> list[runtime.Paused]:
    """The pauses, who paused each named as a person reads it (the user's name, not the id)."""
    pauses = runtime.read_pauses()
    names = actor_names(p.paused_by for p in pauses)
    return [p._replace(paused_by=names.get(p.paused_by, p.paused_by)) for p in pauses]


def _named_rate_limits() -> list[runtime.LimitState]:
    """The rate limits, who set each named as a person reads it."""
    limits = runtime.read_rate_limits()
    names = actor_names(lim.set_by for lim in limits)
    return [lim._replace(set_by=names.get(lim.set_by, lim.set_by)) for lim in limits]


def read_panel(org_id: uuid.UUID | None, window: str = "hour", lane: str | None = None) -> Panel:
    """Everything the page shows, for the whole site (``None``) or one tenant."""
    gauges = runtime.read_gauges_of(org_id)
    holders = runtime.read_holders(org_id=org_id)
    panel = Panel(
        scope=("every tenant" if has_tenants() else "the site") if org_id is None else "",
        gauges=gauges,
        lag=_lag(org_id),
        charts=read_charts(org_id, window, lane),
        holders=holders,
        workers=_workers(holders) if org_id is None else None,
        top_tenants=_top_tenants() if org_id is None and has_tenants() else [],
        schedules=_schedules(org_id),
        unserved=unserved(org_id),
        unserved_kinds=unserved_kinds(org_id),
        pauses=_named_pauses(),
        rate_limits=_named_rate_limits(),
    )
    depth: dict[tuple[str, str], dict[str, int]] = {}
    for (lane, kind, status), n in sorted(gauges.counts.items()):
        panel.by_status[status] = panel.by_status.get(status, 0) + n
        panel.by_lane[lane] = panel.by_lane.get(lane, 0) + n
        panel.by_kind[kind] = panel.by_kind.get(kind, 0) + n
        depth.setdefault((lane, kind), {})[status] = n
    panel.depth = [
        (lane, kind, [(status, counts.get(status, 0)) for status in panel.statuses])
        for (lane, kind), counts in depth.items()
    ]
    return panel


def gauges(request: HttpRequest) -> TemplateResponse:
    """The gauges page (inside the admin: ``admin.site.admin_view`` signs the user in)."""
    if sees_every_tenant(request):
        org_id = None
    elif (staff := tenant_staff(request)) is not None:
        org_id = staff.org_id
    else:
        raise PermissionDenied("the queue gauges are for the site's operator and tenant staff")
    panel = read_panel(org_id, request.GET.get("window", "hour"), request.GET.get("lane") or None)
    if org_id is not None:
        panel.scope = current_tenancy().tenant_names([org_id]).get(org_id) or str(org_id)
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Queue gauges",
        "panel": panel,
        "operator": org_id is None,
        # A viewer reads the operator's page whole and is offered nothing to do on it.
        "may_act": org_id is None and may_act(request),
        # A single-tenant site's page names no tenant (no tenant column, no deepest tenants).
        "has_tenants": has_tenants(),
        "read_at": timezone.now(),
        "windows": list(WINDOWS),
        "stale_after_s": wq_settings.GAUGES_WORKER_STALE_AFTER_S,
        "undeclared": runtime.UNDECLARED,
    }
    return TemplateResponse(request, "admin/workqueue_workers/gauges.html", context)
