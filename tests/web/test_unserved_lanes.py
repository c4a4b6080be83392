"""A lane with due work and no live worker serving it: flagged on the gauges page (operator and
tenant staff alike, each with their own counts) and exported as ``workqueue_lane_unserved``;
the gauges' numbers link to the lists they count."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connections
from prometheus_client import generate_latest

from tests.helpers import back_date
from tests.web.conftest import Person
from workers.gauges import GAUGES, registry
from workqueue import api

pytestmark = pytest.mark.usefixtures("committed")

URL = "/admin/workqueue_workers/queuegauges/"


def _worker(worker_id: str, lane: str, state: str = "running", beat_s_ago: float = 0) -> None:
    with connections["system"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO workqueue_workers_worker"
            " (id, kind, lane, host, pid, started_at, last_beat_at, state)"
            " VALUES (%s, 'NOOP', %s, 'h1', 42, now(), now() - make_interval(secs => %s), %s)",
            [worker_id, lane, beat_s_ago, state],
        )


def _unserved(page: str) -> dict[str, str]:
    return dict(re.findall(r'<li class="unserved-lane" data-lane="([^"]+)">(.*?)</li>', page, re.S))


@pytest.fixture
def lanes(member, settings):  # type: ignore[no-untyped-def]
    """Tenant A: 12 items due in "imports" (the oldest waiting 76 s), 2 in "default", one
    not yet due in "later". Tenant B: 3 due in "imports". Live workers: one of "default"; an
    offline one and a silent one (no beat for 10 minutes) of "imports"."""
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "imports", "later"]}
    a, b = member(), member()
    for n in range(12):
        item, _ = api.enqueue(a.ctx, "NOOP", {"n": n}, lane="imports")
        if n == 0:
            back_date(item.id, available_at=76)
    for _ in range(2):
        api.enqueue(a.ctx, "NOOP", {}, lane="default")
    later, _ = api.enqueue(a.ctx, "NOOP", {}, lane="later")
    back_date(later.id, available_at=-600)  # due in ten minutes
    for _ in range(3):
        api.enqueue(b.ctx, "NOOP", {}, lane="imports")
    _worker("w-default", "default")
    _worker("w-offline", "imports", state="offline")
    _worker("w-silent", "imports", beat_s_ago=600)
    return a, b


def test_the_gauges_page_flags_a_lane_no_live_worker_serves(operator: Person, lanes) -> None:  # type: ignore[no-untyped-def]
    a, _ = lanes
    page = operator.client.get(URL).text
    flagged = _unserved(page)
    assert list(flagged) == ["imports"]
    assert "15 items due" in flagged["imports"] and "waiting 7" in flagged["imports"]
    assert 'id="card-unserved"' in page
    # Its tenant's staff see the flag with their own count only.
    staff = a.client.get(URL).text
    assert "12 items due" in _unserved(staff)["imports"]
    # A worker of the lane starts beating: the flag goes.
    _worker("w-imports", "imports")
    assert _unserved(operator.client.get(URL).text) == {}


def test_unserved_lanes_as_a_metric(lanes) -> None:  # type: ignore[no-untyped-def]
    GAUGES.forget()
    page = generate_latest(registry()).decode()
    values = dict(re.findall(r'workqueue_lane_unserved\{lane="([^"]+)"\} (\S+)', page))
    assert values == {"default": "0.0", "imports": "1.0", "later": "0.0"}


def test_gauge_numbers_link_to_their_filtered_lists(operator: Person, lanes) -> None:  # type: ignore[no-untyped-def]
    page = operator.client.get(URL).text
    pending = re.search(r'id="card-pending"><a class="n" href="([^"]+)">(\d+)<', page)
    assert pending and pending.group(2) == "18"
    listed = operator.client.get(html.unescape(pending.group(1)))
    assert listed.status_code == 200 and "18 work items" in listed.text
    depth = re.search(r'href="([^"]*lane=imports[^"]*)">15<', page)
    assert depth, "the depth table's cell links to its lane, kind and status"
    cell = operator.client.get(html.unescape(depth.group(1)))
    assert "15 work items" in cell.text
    flag = re.search(
        r'class="unserved-lane" data-lane="imports"><strong>imports</strong>: <a href="([^"]+)"',
        page,
    )
    assert flag and "15 work items" in operator.client.get(html.unescape(flag.group(1))).text
