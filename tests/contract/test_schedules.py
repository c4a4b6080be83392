"""Schedules on real PostgreSQL: the sweep's step against state rows made old (the database's
``now()`` decides what is due, so tests back-date the schedule rather than freeze a clock),
sweepers racing without the mutex, a lost state row, per-tenant schedules under row-level
security, and pause and resume with their audit entries."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connections

from audit.models import AuditEntry
from tenancy.contexts import SYSTEM_ACTOR, AppType, new_request_context
from tenancy.scope import tenant_scope
from tests.factories import OrgFactory, UserFactory
from tests.helpers import queue_settings
from workers.models import ScheduleState
from workers.schedules import (
    Schedule,
    declaration_problems,
    register_schedule,
    unregister_schedule,
)
from workers.sweep import enqueue_schedules
from workers.sweep.config import SweepSettings
from workers.sweep.sweeper import sweep_once
from workqueue.models import WorkItem

pytestmark = pytest.mark.usefixtures("committed")

SETTINGS = SweepSettings()
HOURLY = timedelta(hours=1)


@pytest.fixture
def site_org():  # type: ignore[no-untyped-def]
    """The tenant site schedules enqueue for (this site is multi-tenant: it must be named)."""
    org = OrgFactory()
    with queue_settings(SCHEDULE_TENANT=str(org.id)):
        yield org


@pytest.fixture
def declare() -> Iterator:  # type: ignore[type-arg]
    names: list[str] = []

    def add(schedule: Schedule) -> Schedule:
        names.append(schedule.name)
        return register_schedule(schedule)

    yield add
    for name in names:
        unregister_schedule(name)


def db_now() -> datetime:
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def state(name: str) -> ScheduleState:
    return ScheduleState.objects.using("admin").get(pk=name)


def set_state(name: str, **columns: object) -> None:
    ScheduleState.objects.using("admin").filter(pk=name).update(**columns)


def items(name: str) -> list[WorkItem]:
    found = WorkItem.objects.using("admin").filter(idempotency_key__startswith=f"schedule:{name}:")
    return list(found.order_by("created_at"))


def step() -> enqueue_schedules.Enqueued:
    return enqueue_schedules.run_once(new_request_context(AppType.SWEEP), SETTINGS)


def test_a_new_schedule_starts_at_its_next_tick_then_enqueues_each_tick_once(
    site_org, declare
) -> None:
    s = declare(Schedule("hourly", "NOOP", every=HOURLY, payload={"n": 1}))
    before = db_now()
    assert step().started == 1
    assert items("hourly") == []  # the tick due when it was first seen does not fire late
    assert state("hourly").last_tick in {s.latest_tick(before), s.latest_tick(db_now())}
    # A tick later (the row made an hour old): one item, for that tick, in the site's tenant.
    set_state("hourly", last_tick=state("hourly").last_tick - HOURLY)
    done = step()
    [item] = items("hourly")
    assert (done.ticks, done.items, done.skipped) == (1, 1, 0)
    assert item.idempotency_key == s.key(state("hourly").last_tick)
    assert item.org_id == site_org.id and item.kind == "NOOP" and item.payload == {"n": 1}
    assert item.created_by == SYSTEM_ACTOR
    # Nothing more is due this tick, however often the sweep runs.
    assert step().ticks == 0 and step().ticks == 0
    assert len(items("hourly")) == 1
    row = state("hourly")
    assert row.delivered and row.enqueued == 1 and row.last_enqueued_tick == row.last_tick


def test_after_five_ticks_of_downtime_it_enqueues_once_and_counts_five_skipped(
    site_org, declare
) -> None:
    s = declare(Schedule("down", "NOOP", every=HOURLY))
    step()
    before = db_now()
    # The last tick enqueued six ticks ago: five came and went while no sweeper ran.
    set_state("down", last_tick=s.latest_tick(before) - 6 * HOURLY)
    done = step()
    after = db_now()
    rolled = s.latest_tick(after) != s.latest_tick(before)  # an hour turned during the test
    [item] = items("down")
    assert item.idempotency_key == s.key(s.latest_tick(after))
    assert done.skipped == state("down").skipped == (6 if rolled else 5)


def test_a_cron_schedule_takes_the_latest_tick_by_the_database_clock(site_org, declare) -> None:
    s = declare(Schedule("minutely", "NOOP", cron="* * * * *"))
    step()
    set_state("minutely", last_tick=state("minutely").last_tick - timedelta(minutes=3))
    step()
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT date_trunc('minute', now())")
        minute = cursor.fetchone()[0]
    [item] = items("minutely")
    # The database's minute (or the one before, had it turned since the step read the clock).
    assert item.idempotency_key in {s.key(minute), s.key(minute - timedelta(minutes=1))}
    assert state("minutely").skipped in (1, 2)


def test_sweepers_racing_without_the_mutex_enqueue_each_tick_once(site_org, declare) -> None:
    """Correctness comes from the compare-and-set and the key, not from the sweep's mutex:
    eight steps run at once on the same due tick (no mutex taken) write one item."""
    declare(Schedule("race", "NOOP", every=HOURLY))
    step()
    set_state("race", last_tick=state("race").last_tick - 4 * HOURLY)
    barrier = threading.Barrier(8)
    results: list[enqueue_schedules.Enqueued] = []

    def sweeper() -> None:
        try:
            barrier.wait()
            results.append(step())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sweeper) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 8 and not any(r.failed for r in results)
    assert len(items("race")) == 1
    assert sum(r.items for r in results) == 1
    assert state("race").skipped == sum(r.skipped for r in results) in (3, 4)


def test_a_lost_state_row_or_a_failover_meets_the_first_enqueue_and_adds_nothing(
    site_org, declare
) -> None:
    s = declare(Schedule("failover", "NOOP", every=HOURLY))
    step()
    set_state("failover", last_tick=state("failover").last_tick - HOURLY)
    step()
    [first] = items("failover")
    tick = state("failover").last_tick
    # Another host restored an old copy of the state: it believes the tick is still to do.
    set_state("failover", last_tick=tick - HOURLY, delivered=True)
    done = step()
    assert (done.ticks, done.items, done.existing) == (1, 0, 1)
    assert items("failover") == [first] and first.idempotency_key == s.key(tick)


def test_a_tick_claimed_by_a_sweeper_that_died_is_enqueued_by_the_next_pass(
    site_org, declare
) -> None:
    s = declare(Schedule("crash", "NOOP", every=HOURLY))
    step()
    tick = state("crash").last_tick
    # A sweeper claimed the tick and died before enqueuing it.
    set_state("crash", delivered=False)
    done = step()
    [item] = items("crash")
    assert item.idempotency_key == s.key(tick) and done.items == 1
    assert state("crash").delivered and state("crash").skipped == 0


def test_a_payload_the_kind_refuses_closes_the_tick_as_skipped(site_org, declare) -> None:
    declare(Schedule("refused", "NOTIFY_SHIPMENT", every=HOURLY, payload=lambda tick: {"x": 1}))
    step()
    set_state("refused", last_tick=state("refused").last_tick - HOURLY)
    done = step()
    assert items("refused") == [] and done.skipped == 1 and done.failed == 0
    row = state("refused")
    assert row.delivered and row.skipped == 1 and row.last_enqueued_tick is None


def test_a_schedule_of_each_tenant_enqueues_one_item_per_tenant_under_its_rls(declare) -> None:
    orgs = [OrgFactory() for _ in range(3)]
    gone = OrgFactory()
    gone.mark_gone()
    s = declare(Schedule("each", "NOOP", every=HOURLY, tenant="each"))
    step()
    set_state("each", last_tick=state("each").last_tick - HOURLY)
    done = step()
    key = s.key(state("each").last_tick)
    assert (done.ticks, done.items) == (1, 3)
    assert sorted(i.org_id for i in items("each")) == sorted(o.id for o in orgs)
    # Each tenant sees its own item only, through row-level security on the everyday login.
    for org in orgs:
        with tenant_scope(org.id) as using:
            mine = list(WorkItem.objects.using(using).filter(idempotency_key=key))
        assert [i.org_id for i in mine] == [org.id]
    with tenant_scope(gone.id) as using:
        assert not WorkItem.objects.using(using).filter(idempotency_key=key).exists()
    # Every tenant's item for the tick, once: a second pass adds nothing.
    assert step().items == 0 and len(items("each")) == 3


def test_pause_and_resume_are_audited_with_the_actor_and_a_paused_schedule_enqueues_nothing(
    site_org, declare
) -> None:
    declare(Schedule("pausable", "NOOP", every=HOURLY))
    step()
    operator = UserFactory(is_staff=True, is_superuser=True)
    call_command("schedules", "pause", "pausable", "--actor", operator.username, stdout=_Null())
    with pytest.raises(CommandError, match="'pausable' is already paused"):
        call_command("schedules", "pause", "pausable", stdout=_Null())
    # Due, but paused: nothing.
    set_state("pausable", last_tick=state("pausable").last_tick - 3 * HOURLY)
    assert step() == enqueue_schedules.Enqueued()
    assert items("pausable") == [] and state("pausable").paused
    call_command("schedules", "resume", "pausable", "--actor", operator.username, stdout=_Null())
    # Resumed: it starts afresh at its next tick; what came due while paused neither fires nor
    # counts as skipped.
    assert step().started == 1
    assert items("pausable") == [] and state("pausable").skipped == 0
    entries = AuditEntry.objects.using("admin").filter(subject_id="pausable").order_by("created_at")
    assert [(e.action, e.actor, e.org_id) for e in entries] == [
        ("schedule.paused", str(operator.pk), site_org.id),
        ("schedule.resumed", str(operator.pk), site_org.id),
    ]
    assert entries[0].data["via"].startswith("manage.py schedules pause")
    with pytest.raises(CommandError, match="'pausable' is not paused"):
        call_command("schedules", "resume", "pausable", stdout=_Null())
    with pytest.raises(CommandError, match="no schedule 'nope' is declared"):
        call_command("schedules", "pause", "nope", stdout=_Null())
    with pytest.raises(CommandError, match="--actor: no user"):
        call_command("schedules", "pause", "pausable", "--actor", "nobody", stdout=_Null())


def test_pausing_a_schedule_of_each_tenant_is_audited_in_every_tenant(declare) -> None:
    orgs = [OrgFactory() for _ in range(2)]
    declare(Schedule("each-paused", "NOOP", every=HOURLY, tenant="each"))
    call_command("schedules", "pause", "each-paused", stdout=_Null())
    entries = AuditEntry.objects.using("admin").filter(subject_id="each-paused")
    assert sorted(e.org_id for e in entries) == sorted(o.id for o in orgs)
    assert {(e.action, e.actor) for e in entries} == {("schedule.paused", SYSTEM_ACTOR)}


def test_the_list_says_where_each_schedule_stands(site_org, declare) -> None:
    declare(Schedule("listed", "NOOP", cron="*/5 * * * *"))
    step()
    out = _Null()
    call_command("schedules", "list", stdout=out)
    assert "listed kind=NOOP cron */5 * * * * UTC tenant=site paused=no" in out.text
    assert "next_tick=" in out.text and "skipped=0" in out.text


def test_the_sweep_runs_the_step_and_reads_nothing_without_a_schedule(site_org, declare) -> None:
    assert step() == enqueue_schedules.Enqueued()
    assert not ScheduleState.objects.using("admin").exists()
    declare(Schedule("swept", "NOOP", every=HOURLY))
    result = sweep_once(SETTINGS)
    assert result is not None and result.results["enqueue_schedules"].started == 1


class _Null:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_metrics_carry_each_schedules_last_tick_next_tick_skipped_and_paused(
    site_org, declare
) -> None:
    from prometheus_client import CollectorRegistry

    from workers.gauges import CachedGauges, QueueCollector

    s = declare(Schedule("metered", "NOOP", every=HOURLY))
    declare(Schedule("unswept", "NOOP", every=HOURLY))
    step()
    set_state("metered", last_tick=state("metered").last_tick - 3 * HOURLY)
    step()
    ScheduleState.objects.using("admin").filter(pk="unswept").delete()
    registry = CollectorRegistry()
    registry.register(QueueCollector(CachedGauges(cache_s=0)))

    def sample(name: str, schedule: str) -> float | None:
        return registry.get_sample_value(name, {"schedule": schedule})

    tick = state("metered").last_tick
    last = "workqueue_schedule_last_tick_timestamp_seconds"
    upcoming = "workqueue_schedule_next_tick_timestamp_seconds"
    assert sample(last, "metered") == tick.timestamp()
    assert sample("workqueue_schedule_skipped_total", "metered") == 2
    assert sample("workqueue_schedule_enqueued_total", "metered") == 1
    assert sample("workqueue_schedule_paused", "metered") == 0
    next_tick = sample(upcoming, "metered")
    assert next_tick == (tick + HOURLY).timestamp() or s.latest_tick(db_now()) != tick
    # Declared, not swept yet: zeros, and no next tick.
    assert sample(last, "unswept") == 0 and sample(upcoming, "unswept") is None
    call_command("schedules", "pause", "metered", stdout=_Null())
    assert sample("workqueue_schedule_paused", "metered") == 1
    assert sample(upcoming, "metered") is None


def test_a_scheduled_task_enqueues_its_call_with_its_queue_and_policy(site_org) -> None:
    from tests import tasks
    from workers.django_tasks.schedules import schedule_task

    s = schedule_task(tasks.add, every=HOURLY, args=[2, 3])
    try:
        assert s.name == "tests.tasks.add"
        assert declaration_problems() == []  # its call is made once, as a tick would make it
        step()
        set_state(s.name, last_tick=state(s.name).last_tick - HOURLY)
        step()
        [item] = items(s.name)
        assert item.kind == "DJANGO_TASK" and item.lane == "default"
        assert item.payload["path"] == "tests.tasks.add" and item.payload["args"] == [2, 3]
        assert item.max_attempts == 5 and item.org_id == site_org.id
    finally:
        unregister_schedule(s.name)
    with pytest.raises(ImproperlyConfigured, match=r"'tests\.tasks\.add': args\[0\]"):
        schedule_task(tasks.add, every=HOURLY, args=[object()])
    with pytest.raises(ImproperlyConfigured, match=r"do not fit tests\.tasks\.add: missing a"):
        schedule_task(tasks.add, name="add-wrong", every=HOURLY, args=[1])  # add(a, b)
    with pytest.raises(ImproperlyConfigured, match="put @scheduled above @task"):
        schedule_task(tasks.add.func, every=HOURLY)  # type: ignore[arg-type]
