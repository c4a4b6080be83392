"""Schedules: work enqueued on a timetable, declared in code beside its kind.

    # myapp/work.py
    from workers.schedules import Schedule, register_schedule

    register_schedule(Schedule("nightly-report", "REPORT", cron="0 3 * * *", payload={...}))
    register_schedule(Schedule("poll-feeds", "POLL", every=timedelta(minutes=5), tenant="each"))

A schedule's ticks are instants: ``every`` counts from the Unix epoch in UTC (``every=1 h``
falls on the hour, whatever host computes it), ``cron`` is a cron expression (``cronsim``) in
``timezone`` (UTC unless named). The sweep's step (``workers/sweep/enqueue_schedules.py``)
enqueues one item per tick, for the site or for each tenant, with the tick in its idempotency
key (``schedule:<name>:<tick>``), so any number of sweepers, a restart or a failover adds
nothing to a tick already enqueued. Each pass takes the latest tick due by the database's
clock: ticks that came and went while no sweeper ran are skipped and counted, never enqueued
in a burst.

A declaration that cannot work is refused where it is declared (a bad cron expression, an
``every`` that is not positive, a bad name) or, once every app's ``work`` module is loaded,
in ``check_declarations`` (an unknown kind, a payload the kind refuses, a tenant the tenancy
cannot give): one line naming the schedule, and the process does not start.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from django.core.exceptions import ImproperlyConfigured

from tenancy.contexts import OpContext, RequestContext, service_context
from workqueue import runtime

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Schedule names: what kind names may hold, short enough for the key (KEY_MAX) with its tick.
NAME_MAX = 100
# The most cron ticks counted between two passes: a minutely expression down for a year would
# be half a million; past this many the count stops (``every`` is counted exactly).
CRON_COUNT_MAX = 100_000
_MICROSECOND = timedelta(microseconds=1)

Tenants = Literal["each"] | None


@dataclass(frozen=True)
class ScheduledItem:
    """What one tick enqueues (for each tenant the schedule serves)."""

    kind: str
    payload: dict[str, Any]
    lane: str | None = None
    priority: int = 0
    max_attempts: int | None = None


@dataclass(frozen=True)
class Schedule:
    """Enqueue ``kind`` with ``payload`` at every tick of ``every`` or ``cron`` (one of them).

    ``payload`` is a dict, or a callable given the tick (an aware datetime) that returns one.
    ``lane`` and ``priority`` are the items' (None: the kind's lane). ``tenant``: None for the
    site (the single tenancy's one tenant, else ``WORKQUEUE["SCHEDULE_TENANT"]``), ``"each"``
    for every live tenant (one item per tenant per tick, each under its tenant's row-level
    security). ``build`` (for producers such as the ``@task`` schedules) makes the item
    instead of ``kind``/``payload``/``lane``/``priority``.
    """

    name: str
    kind: str
    every: timedelta | None = None
    cron: str | None = None
    payload: dict[str, Any] | Callable[[datetime], dict[str, Any]] = field(default_factory=dict)
    lane: str | None = None
    priority: int = 0
    tenant: Tenants = None
    timezone: str = "UTC"
    description: str = ""
    build: Callable[[datetime], ScheduledItem] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        where = f"schedule {self.name!r}"
        try:
            runtime.check_name("name", self.name, NAME_MAX)
            runtime.check_name("kind", self.kind, 100)
            if self.lane is not None:
                runtime.check_lane(self.lane)
        except runtime.InvalidPayload as exc:
            raise ImproperlyConfigured(f"{where}: {exc}") from None
        if (self.every is None) == (self.cron is None):
            raise ImproperlyConfigured(f"{where}: give every=timedelta(...) or cron='...', one")
        if self.every is not None:
            if not isinstance(self.every, timedelta):
                raise ImproperlyConfigured(f"{where}: every must be a timedelta")
            if self.every <= timedelta(0):
                raise ImproperlyConfigured(f"{where}: every must be positive (got {self.every})")
        if self.tenant not in (None, "each"):
            raise ImproperlyConfigured(
                f"{where}: tenant must be None (the site) or 'each' (every tenant), "
                f"not {self.tenant!r}"
            )
        if type(self.priority) is not int or not -32768 <= self.priority <= 32767:
            raise ImproperlyConfigured(f"{where}: priority must be an integer (smallint)")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise ImproperlyConfigured(f"{where}: unknown timezone {self.timezone!r}") from None
        if self.cron is not None:
            if not isinstance(self.cron, str):
                raise ImproperlyConfigured(f"{where}: cron must be a string")
            try:
                CronSim(self.cron, datetime.now(UTC))
            except CronSimError as exc:
                raise ImproperlyConfigured(f"{where}: cron {self.cron!r}: {exc}") from None
        if not (isinstance(self.payload, dict) or callable(self.payload)):
            raise ImproperlyConfigured(f"{where}: payload must be a dict or a callable(tick)")

    # -- the ticks ------------------------------------------------------------------------------

    @property
    def rule(self) -> str:
        """The timetable as one short text (``every 0:05:00``, ``cron */5 * * * * UTC``)."""
        if self.every is not None:
            return f"every {self.every}"
        return f"cron {self.cron} {self.timezone}"

    def latest_tick(self, now: datetime) -> datetime:
        """The latest tick at or before ``now`` (an aware datetime: the database's clock)."""
        if self.every is not None:
            return EPOCH + ((now - EPOCH) // self.every) * self.every
        zone = ZoneInfo(self.timezone)
        # cronsim's reverse walk starts strictly before its instant: one microsecond on, so a
        # tick that is exactly now counts as due.
        found = next(CronSim(str(self.cron), (now + _MICROSECOND).astimezone(zone), reverse=True))
        return found.astimezone(UTC)

    def next_tick(self, now: datetime) -> datetime:
        """The first tick after ``now``."""
        if self.every is not None:
            return self.latest_tick(now) + self.every
        zone = ZoneInfo(self.timezone)
        return next(CronSim(str(self.cron), now.astimezone(zone))).astimezone(UTC)

    def ticks_between(self, after: datetime, before: datetime) -> int:
        """How many ticks fall strictly between ``after`` and ``before`` (the skipped ones
        between two enqueued ticks). Exact for ``every``; for ``cron``, at most
        ``CRON_COUNT_MAX``."""
        if before <= after:
            return 0
        if self.every is not None:
            first = (after - EPOCH) // self.every + 1  # the first index after ``after``
            last = -((EPOCH - before) // self.every) - 1  # the last index before ``before``
            return max(0, last - first + 1)
        zone = ZoneInfo(self.timezone)
        counted = 0
        for tick in CronSim(str(self.cron), after.astimezone(zone)):
            if tick.astimezone(UTC) >= before or counted >= CRON_COUNT_MAX:
                break
            counted += 1
        return counted

    # -- what a tick enqueues -------------------------------------------------------------------

    def key(self, tick: datetime) -> str:
        """The idempotency key of this schedule's item for ``tick``: the same on every host."""
        when = tick.astimezone(UTC).isoformat().replace("+00:00", "Z")
        return f"{runtime.SCHEDULE_KEY_PREFIX}{self.name}:{when}"

    def item(self, tick: datetime) -> ScheduledItem:
        """What ``tick`` enqueues."""
        if self.build is not None:
            return self.build(tick)
        payload = self.payload(tick) if callable(self.payload) else self.payload
        return ScheduledItem(self.kind, dict(payload), self.lane, self.priority)


_SCHEDULES: dict[str, Schedule] = {}


def register_schedule(schedule: Schedule) -> Schedule:
    """Declare a schedule (in an app's ``work`` module, beside its kind); the same name twice
    with a different declaration is refused."""
    existing = _SCHEDULES.get(schedule.name)
    if existing is not None and existing != schedule:
        raise ImproperlyConfigured(f"schedule {schedule.name!r} is already declared differently")
    _SCHEDULES[schedule.name] = schedule
    return schedule


def unregister_schedule(name: str) -> None:
    """Forget a declaration (tests that declare their own)."""
    _SCHEDULES.pop(name, None)


def all_schedules() -> list[Schedule]:
    return [_SCHEDULES[name] for name in sorted(_SCHEDULES)]


def get_schedule(name: str) -> Schedule:
    try:
        return _SCHEDULES[name]
    except KeyError:
        known = ", ".join(sorted(_SCHEDULES)) or "none"
        raise LookupError(f"no schedule {name[:100]!r} is declared (declared: {known})") from None


# -- tenants --------------------------------------------------------------------------------------


def site_tenant() -> uuid.UUID | None:
    """The tenant a site schedule enqueues for: the single tenancy's one tenant, else the one
    ``WORKQUEUE["SCHEDULE_TENANT"]`` names (None: none is named)."""
    from tenancy.modes import SINGLE_TENANT_ID, current_tenancy
    from wqcore.conf import wq_settings

    if wq_settings.SCHEDULE_TENANT is not None:
        return uuid.UUID(str(wq_settings.SCHEDULE_TENANT))
    if current_tenancy().name == "single":
        return SINGLE_TENANT_ID
    return None


def tenants_of(schedule: Schedule, rctx: RequestContext) -> list[OpContext]:
    """The service contexts ``schedule`` enqueues under now: the site's tenant, or every live
    tenant's (the item's author is the system actor)."""
    from tenancy.membership import service_contexts
    from tenancy.modes import SINGLE_TENANT_ID, current_tenancy

    if schedule.tenant is None:
        tenant = site_tenant()
        return [] if tenant is None else [service_context(rctx, tenant)]
    if current_tenancy().name == "single":
        return [service_context(rctx, SINGLE_TENANT_ID)]
    return service_contexts(rctx)


def declaration_problems() -> list[str]:
    """What is wrong with the declared schedules once every kind is registered: one line each.
    (Settings that do not read, or a tenancy that cannot be used, are ``startup_problem``'s.)"""
    from tenancy.modes import current_tenancy

    try:
        tenancy = current_tenancy().name
        has_site_tenant = site_tenant() is not None
    except ImproperlyConfigured:
        tenancy, has_site_tenant = None, True
    problems = []
    for schedule in all_schedules():
        where = f"schedule {schedule.name!r}"
        try:
            if schedule.build is not None:
                # A producer's item (a task's call) is made once now, as a tick would make it.
                made = schedule.item(datetime.now(UTC))
                runtime.validated(runtime.NewItem(made.kind, made.payload, lane=made.lane))
            else:
                kind = runtime.get_kind(schedule.kind)
                if isinstance(schedule.payload, dict):
                    runtime.validated(
                        runtime.NewItem(kind.name, schedule.payload, lane=schedule.lane)
                    )
        except (runtime.InvalidPayload, ImproperlyConfigured, TypeError, ValueError) as exc:
            problems.append(f"{where}: {exc}")
        except Exception as exc:  # a producer's own refusal (InvalidTask): named, not raised
            problems.append(f"{where}: {type(exc).__name__}: {exc}")
        if tenancy is None:
            continue
        if schedule.tenant is None and not has_site_tenant:
            problems.append(
                f"{where}: a site schedule needs a tenant under the {tenancy!r} tenancy: set "
                "WORKQUEUE['SCHEDULE_TENANT'] to the tenant's id, or declare tenant='each'"
            )
        if schedule.tenant == "each" and tenancy not in ("single", "orgs"):
            problems.append(
                f"{where}: tenant='each' needs a tenancy that lists its tenants ('single' or "
                f"'orgs'; {tenancy!r} names only each request's): declare tenant=None and set "
                "WORKQUEUE['SCHEDULE_TENANT']"
            )
    return problems


def too_fine() -> list[str]:
    """Schedules whose ``every`` is shorter than the sweep's interval: the sweep enqueues at
    most one tick per pass, so every other tick would be skipped (one line each)."""
    from wqcore.conf import wq_settings

    interval = timedelta(seconds=wq_settings.SWEEP_INTERVAL_S)
    return [
        f"schedule {s.name!r}: every {s.every} is shorter than SWEEP_INTERVAL_S ({interval}): "
        "the ticks between the sweep's passes are skipped; lower SWEEP_INTERVAL_S or lengthen it"
        for s in all_schedules()
        if s.every is not None and s.every < interval
    ]


def check_declarations() -> None:
    """Refuse to start on a schedule that cannot work (called once every ``work`` module is
    loaded): ``ImproperlyConfigured`` naming each."""
    problems = declaration_problems()
    if problems:
        raise ImproperlyConfigured("; ".join(problems))
