"""Schedules' tick arithmetic and declarations, without a database: the clock is a parameter
(the sweep passes the database's ``now()``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from workers.schedules import (
    Schedule,
    declaration_problems,
    register_schedule,
    unregister_schedule,
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


EVERY_5M = Schedule("five", "NOOP", every=timedelta(minutes=5))
CRON_5M = Schedule("five-cron", "NOOP", cron="*/5 * * * *")


@pytest.mark.parametrize("schedule", [EVERY_5M, CRON_5M], ids=["every", "cron"])
def test_latest_and_next_tick_agree_for_every_and_cron(schedule: Schedule) -> None:
    assert schedule.latest_tick(at("2026-12-01 10:07:30")) == at("2026-12-01 10:05:00")
    assert schedule.next_tick(at("2026-12-01 10:07:30")) == at("2026-12-01 10:10:00")
    # A tick that is exactly now is due now, and the next one is the one after.
    assert schedule.latest_tick(at("2026-12-01 10:05:00")) == at("2026-12-01 10:05:00")
    assert schedule.next_tick(at("2026-12-01 10:05:00")) == at("2026-12-01 10:10:00")
    # One microsecond before a tick, the previous one is the latest.
    just_before = at("2026-12-01 10:05:00") - timedelta(microseconds=1)
    assert schedule.latest_tick(just_before) == at("2026-12-01 10:00:00")


@pytest.mark.parametrize("schedule", [EVERY_5M, CRON_5M], ids=["every", "cron"])
def test_ticks_between_counts_the_skipped_ones_strictly_between(schedule: Schedule) -> None:
    last, latest = at("2026-12-01 10:00:00"), at("2026-12-01 10:30:00")
    assert schedule.ticks_between(last, latest) == 5  # 10:05 ... 10:25
    assert schedule.ticks_between(last, at("2026-12-01 10:05:00")) == 0
    assert schedule.ticks_between(latest, last) == 0
    # A last tick off the grid (the declaration changed): the grid's ticks between still count.
    assert schedule.ticks_between(at("2026-12-01 10:02:00"), latest) == 5


def test_every_counts_from_the_epoch_so_every_host_agrees() -> None:
    hourly = Schedule("hourly", "NOOP", every=timedelta(hours=1))
    assert hourly.latest_tick(at("2026-12-01 10:59:59")) == at("2026-12-01 10:00:00")
    second = Schedule("second", "NOOP", every=timedelta(seconds=1))
    assert second.latest_tick(at("2026-12-01 10:00:00.999999")) == at("2026-12-01 10:00:00")
    assert second.ticks_between(at("2026-12-01 10:00:00"), at("2026-12-01 10:00:06")) == 5


def test_a_cron_schedule_keeps_its_time_zone_across_daylight_saving() -> None:
    berlin = Schedule("berlin", "NOOP", cron="0 3 * * *", timezone="Europe/Berlin")
    # 03:00 in Berlin is 02:00 UTC in winter and 01:00 UTC in summer.
    assert berlin.latest_tick(at("2026-01-15 12:00:00")) == at("2026-01-15 02:00:00")
    assert berlin.latest_tick(at("2026-07-15 12:00:00")) == at("2026-07-15 01:00:00")


def test_the_key_names_the_schedule_and_the_tick_in_utc() -> None:
    assert EVERY_5M.key(at("2026-12-01 10:05:00")) == "schedule:five:2026-12-01T10:05:00Z"


def test_the_item_is_the_payload_or_what_the_callable_makes_of_the_tick() -> None:
    fixed = Schedule("fixed", "NOOP", every=timedelta(minutes=1), payload={"a": 1}, lane="x")
    made = Schedule("made", "NOOP", every=timedelta(minutes=1), payload=lambda t: {"at": str(t)})
    tick = at("2026-12-01 10:05:00")
    assert fixed.item(tick).payload == {"a": 1} and fixed.item(tick).lane == "x"
    assert made.item(tick).payload == {"at": str(tick)}


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"cron": "61 * * * *"}, "schedule 'bad': cron '61 * * * *': Bad minute"),
        ({"every": timedelta(0)}, "schedule 'bad': every must be positive"),
        ({"every": timedelta(seconds=-1)}, "schedule 'bad': every must be positive"),
        ({}, "schedule 'bad': give every=timedelta(...) or cron='...', one"),
        ({"every": timedelta(1), "cron": "* * * * *"}, "give every=timedelta(...) or cron="),
        ({"every": 5}, "schedule 'bad': every must be a timedelta"),
        ({"every": timedelta(1), "tenant": "all"}, "tenant must be None (the site) or 'each'"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "unknown timezone 'Mars/Olympus'"),
        ({"every": timedelta(1), "lane": "no spaces"}, "schedule 'bad': lane: must be 1 to 50"),
    ],
)
def test_a_bad_declaration_is_one_line_naming_it(kwargs: dict, says: str) -> None:
    with pytest.raises(ImproperlyConfigured) as raised:
        Schedule("bad", "NOOP", **kwargs)
    assert says in str(raised.value)


def test_an_unknown_kind_or_a_payload_it_refuses_is_named_once_the_kinds_are_loaded() -> None:
    register_schedule(Schedule("ghost", "NO_SUCH_KIND", every=timedelta(minutes=1)))
    register_schedule(
        Schedule("wrong", "NOTIFY_SHIPMENT", every=timedelta(minutes=1), payload={"x": 1})
    )
    try:
        problems = declaration_problems()
    finally:
        unregister_schedule("ghost")
        unregister_schedule("wrong")
    assert any(p.startswith("schedule 'ghost': kind: unknown work kind") for p in problems)
    assert any(p.startswith("schedule 'wrong': payload.") for p in problems)


def test_the_same_name_declared_differently_is_refused() -> None:
    register_schedule(Schedule("twice", "NOOP", every=timedelta(minutes=1)))
    try:
        register_schedule(Schedule("twice", "NOOP", every=timedelta(minutes=1)))  # the same
        with pytest.raises(ImproperlyConfigured, match="'twice' is already declared"):
            register_schedule(Schedule("twice", "NOOP", every=timedelta(minutes=2)))
    finally:
        unregister_schedule("twice")


def test_an_every_shorter_than_the_sweeps_interval_is_warned_about(settings) -> None:
    from workers.apps import _schedule_checks
    from workers.schedules import too_fine

    settings.WORKQUEUE = {**settings.WORKQUEUE, "SWEEP_INTERVAL_S": 5}
    register_schedule(Schedule("fine", "NOOP", every=timedelta(seconds=1)))
    try:
        [line] = too_fine()
        assert line.startswith("schedule 'fine': every 0:00:01 is shorter than SWEEP_INTERVAL_S")
        [warning] = _schedule_checks()
        assert warning.id == "workqueue_workers.W001"
    finally:
        unregister_schedule("fine")
    assert too_fine() == []
