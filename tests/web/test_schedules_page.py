"""Schedules on the admin's queue gauges page: listed with their ticks, paused and resumed by
the operator (audited with the operator as the actor), seen but not changed by tenant staff."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group

from audit.models import AuditEntry
from tenancy.contexts import AppType, new_request_context
from tenancy.roles import ensure_viewer_group, viewer_group
from tests.factories import UserFactory
from tests.web.conftest import Person, signed_in
from workers.models import ScheduleState
from workers.schedules import Schedule, register_schedule, unregister_schedule
from workers.sweep import enqueue_schedules
from workers.sweep.config import SweepSettings

pytestmark = pytest.mark.usefixtures("committed")

URL = "/admin/workqueue_workers/queuegauges/"


@pytest.fixture
def schedules(member, settings) -> Iterator[tuple[Person, Person]]:  # type: ignore[no-untyped-def]
    """Tenant A is the site's tenant; one site schedule and one of each tenant, swept once."""
    a, b = member(), member()
    settings.WORKQUEUE = {**settings.WORKQUEUE, "SCHEDULE_TENANT": str(a.org_id)}
    register_schedule(Schedule("site-report", "NOOP", cron="0 3 * * *"))
    register_schedule(Schedule("each-poll", "NOOP", every=timedelta(minutes=5), tenant="each"))
    enqueue_schedules.run_once(new_request_context(AppType.SWEEP), SweepSettings())
    yield a, b
    unregister_schedule("site-report")
    unregister_schedule("each-poll")


def table(html: str) -> str:
    found = re.search(r'<table id="schedules">(.*?)</table>', html, re.S)
    assert found
    return found.group(1)


def test_the_operator_sees_every_schedule_and_pauses_and_resumes_one(
    operator: Person, schedules
) -> None:
    a, b = schedules
    rows = table(operator.client.get(URL).text)
    assert "site-report" in rows and "cron 0 3 * * * UTC" in rows and "each-poll" in rows
    assert "every 0:05:00" in rows and rows.count('value="Pause"') == 2
    toggle = "/admin/workqueue_workers/queuegauges/schedules/each-poll/toggle/"
    response = operator.client.post(toggle, {"action": "pause"})
    assert response.status_code == 302
    assert ScheduleState.objects.using("admin").get(pk="each-poll").paused
    rows = table(operator.client.get(URL).text)
    assert re.search(r"each-poll</td>.*?paused\s*<form", rows, re.S)
    assert operator.client.post(toggle, {"action": "resume"}).status_code == 302
    assert not ScheduleState.objects.using("admin").get(pk="each-poll").paused
    entries = AuditEntry.objects.using("admin").filter(subject_id="each-poll")
    assert sorted((e.action, e.org_id) for e in entries) == sorted(
        (action, org)
        for action in ("schedule.paused", "schedule.resumed")
        for org in (a.org_id, b.org_id)
    )
    assert {e.actor for e in entries} == {str(operator.user.pk)}
    assert {e.data["via"] for e in entries} == {"the admin's queue gauges"}
    # A GET changes nothing; a bad action is refused.
    assert operator.client.get(toggle).status_code == 405
    assert operator.client.post(toggle, {"action": "drop"}).status_code == 403


def test_tenant_staff_see_their_schedules_and_cannot_pause_them(schedules) -> None:
    a, b = schedules
    rows_a, rows_b = table(a.client.get(URL).text), table(b.client.get(URL).text)
    assert "site-report" in rows_a and "each-poll" in rows_a  # A is the site's tenant
    assert "site-report" not in rows_b and "each-poll" in rows_b
    assert 'value="Pause"' not in rows_a
    toggle = "/admin/workqueue_workers/queuegauges/schedules/each-poll/toggle/"
    assert a.client.post(toggle, {"action": "pause"}).status_code == 403
    assert not ScheduleState.objects.using("admin").get(pk="each-poll").paused


def test_a_viewer_sees_every_schedule_and_is_offered_nothing_to_change(
    operator: Person, schedules
) -> None:
    """The viewer reads the operator's page whole (every schedule, who paused a lane) and the
    page offers it no form or link to change anything."""
    ensure_viewer_group("admin")
    user = UserFactory(is_staff=True)
    user.groups.add(Group.objects.using("admin").get(name=viewer_group()))
    page = signed_in(user).get(URL).text
    rows = table(page)
    assert "site-report" in rows and "each-poll" in rows
    assert "<form" not in rows and "/toggle/" not in page
    assert "Pause or resume a lane" not in page and "Set or clear a rate limit" not in page
    # The operator's page still offers both.
    theirs = operator.client.get(URL).text
    assert table(theirs).count('value="Pause"') == 2 and "Set or clear a rate limit" in theirs
