"""A kind with due work that no live worker serves, though its lane is served for other kinds:
exported as ``workqueue_kind_unserved``, warned of by ``manage.py check`` and listed on the
admin's gauges page (the operator's and a tenant's staff, each with their own counts)."""

from __future__ import annotations

import html
import io
import re

import pytest
from django.core.management import call_command
from django.db import connections
from prometheus_client import generate_latest

from tenancy.current import using_context
from tests import tasks
from tests.web.conftest import Person
from workers.gauges import GAUGES, registry
from workqueue import api

pytestmark = pytest.mark.usefixtures("committed")

URL = "/admin/workqueue_workers/queuegauges/"


def _worker(worker_id: str, kinds: str, lane: str = "default", state: str = "running") -> None:
    with connections["system"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO workqueue_workers_worker"
            " (id, kind, lane, host, pid, started_at, last_beat_at, state)"
            " VALUES (%s, %s, %s, 'h1', 42, now(), now(), %s)",
            [worker_id, kinds, lane, state],
        )


def _scrape() -> dict[tuple[str, str], str]:
    GAUGES.forget()
    page = generate_latest(registry()).decode()
    found = re.findall(r'workqueue_kind_unserved\{kind="([^"]+)",lane="([^"]+)"\} (\S+)', page)
    return {(lane, kind): value for kind, lane, value in found}


def _check() -> str:
    out = io.StringIO()
    call_command("check", stdout=out, stderr=out)
    return out.getvalue()


def test_a_kind_no_live_worker_serves_is_flagged_though_its_lane_is_served(ctx) -> None:
    api.enqueue(ctx, "NOOP", {})
    with using_context(ctx):
        tasks.add.enqueue(1, 2)
    _worker("w-noop", "NOOP")
    _worker("w-gone", "DJANGO_TASK", state="offline")
    values = _scrape()
    assert values[("default", "DJANGO_TASK")] == "1.0"
    assert values[("default", "NOOP")] == "0.0"
    # A registered kind with nothing due is listed, not flagged.
    assert values[("default", "NOTIFY_SHIPMENT")] == "0.0"
    assert "no running worker serves the kind 'DJANGO_TASK'" in _check()
    # A worker serving it starts: neither says it any more.
    _worker("w-all", "DJANGO_TASK,NOOP,NOTIFY_SHIPMENT")
    assert _scrape()[("default", "DJANGO_TASK")] == "0.0"
    assert "no running worker serves the kind 'DJANGO_TASK'" not in _check()


def test_check_says_nothing_of_kinds_while_no_worker_runs() -> None:
    _worker("w-gone", "NOOP", state="offline")
    assert "workqueue_workers.W002" not in _check()


def _flagged(page: str) -> dict[tuple[str, str], str]:
    found = re.findall(
        r'<li class="unserved-kind" data-lane="([^"]+)" data-kind="([^"]+)">(.*?)</li>', page, re.S
    )
    return {(lane, kind): text for lane, kind, text in found}


def test_the_gauges_page_lists_a_kind_no_live_worker_serves(
    operator: Person, member, settings
) -> None:  # type: ignore[no-untyped-def]
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "imports"]}
    a, b = member(), member()
    for _ in range(3):
        api.enqueue(a.ctx, "NOOP", {})
    with using_context(a.ctx):
        tasks.add.enqueue(1, 2)
        tasks.add.enqueue(3, 4)
    with using_context(b.ctx):
        tasks.add.enqueue(5, 6)
    api.enqueue(b.ctx, "NOOP", {}, lane="imports")
    _worker("w-noop", "NOOP")
    _worker("w-gone", "DJANGO_TASK", state="offline")
    page = operator.client.get(URL).text
    flagged = _flagged(page)
    # Only the kind the live worker of its lane leaves out: NOOP is served in "default", and a
    # lane with no live worker at all ("imports") is the lanes' list's, not listed again here.
    assert list(flagged) == [("default", "DJANGO_TASK")]
    assert "3 items due" in flagged[("default", "DJANGO_TASK")]
    assert "manage.py runworker DJANGO_TASK --lane default" in flagged[("default", "DJANGO_TASK")]
    assert re.search(r'id="card-unserved-kinds"><span class="n">1</span>unserved kind<', page)
    link = re.search(
        r'class="unserved-kind"[^>]*><strong>DJANGO_TASK</strong> in default: <a href="([^"]+)"',
        page,
    )
    assert link
    listed = operator.client.get(html.unescape(link.group(1))).text
    assert "3 work items" in listed
    # A tenant's staff see the row with their own count only.
    assert "2 items due" in _flagged(a.client.get(URL).text)[("default", "DJANGO_TASK")]
    # A worker serving the kind starts beating: the row goes.
    _worker("w-tasks", "DJANGO_TASK")
    page = operator.client.get(URL).text
    assert _flagged(page) == {}
    assert 'id="unserved-kinds"' not in page
