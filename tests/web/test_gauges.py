"""The admin's queue gauges: the whole site for the operator, one tenant for its staff."""

from __future__ import annotations

import re

import pytest
from django.db import connections

from outbox.emit import emit
from tenancy.contexts import Role
from tests.helpers import back_date_outbox, dead_letter
from tests.web.conftest import Person
from workers.models import Worker, WorkerState
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.settle import complete

pytestmark = pytest.mark.usefixtures("committed")

URL = "/admin/workqueue_workers/queuegauges/"


def card(html: str, name: str) -> str:
    found = re.search(rf'id="card-{name}"><(?:span|a) class="n"[^>]*>([^<]*)<', html)
    assert found, name
    return found.group(1).strip()


def points(html: str, chart: str, series: str) -> list[float]:
    """The values of one series of one chart, as its points carry them (data-value)."""
    figure = re.search(rf'<figure class="wq-chart" id="chart-{chart}">(.*?)</figure>', html, re.S)
    assert figure, chart
    drawn = re.search(
        rf'<a class="series"[^>]* data-series="{series}"[^>]*>(.*?)</a>', figure.group(1), re.S
    )
    assert drawn, series
    return [float(v) for v in re.findall(r'data-value="([^"]+)"', drawn.group(1))]


def _back_date_attempt(item_id, seconds: float) -> None:  # type: ignore[no-untyped-def]
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_attempt SET ended_at = ended_at - make_interval(secs => %s)"
            " WHERE item_id = %s",
            [seconds, item_id],
        )


@pytest.fixture
def site(member, worker_rctx, settings):  # type: ignore[no-untyped-def]
    """Tenant A: two pending items, one dead letter, one claimed by worker w-live, an outbox
    row waiting 30 s. Tenant B: one pending, one done now, one done 5 minutes ago, one done
    two hours ago (the attempts rolled up by the sweep's step). A live worker, and an offline
    one."""
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "held", "fast"]}
    a, b = member(), member()
    for _ in range(2):
        api.enqueue(a.ctx, "NOOP", {})
    dead_letter(a.ctx, worker_rctx)
    held, _ = api.enqueue(a.ctx, "NOOP", {}, lane="held")
    claim(worker_rctx, "held", ["NOOP"], "w-live", 30, 10)
    back_date_outbox(emit(a.ctx, "work.NOOP", {}), created_at=30)
    api.enqueue(b.ctx, "NOOP", {})
    done = []
    for _ in range(3):
        api.enqueue(b.ctx, "NOOP", {}, lane="fast")
        [(ctx, claimed)] = claim(worker_rctx, "fast", ["NOOP"], "w-gone", 30, 1)
        done.append(complete(ctx, claimed))
    _back_date_attempt(done[1].id, 300)
    _back_date_attempt(done[2].id, 7200)
    runtime.roll_up_minutes()
    with connections["system"].cursor() as cursor:
        for worker_id, state in (("w-live", "running"), ("w-old", "offline")):
            cursor.execute(
                "INSERT INTO workqueue_workers_worker"
                " (id, kind, lane, host, pid, started_at, last_beat_at, state)"
                " VALUES (%s, 'NOOP', 'default', 'h1', 42, now(), now(), %s)",
                [worker_id, state],
            )
    return a, b, held


def test_the_operator_sees_the_whole_site(operator: Person, site) -> None:
    response = operator.client.get(URL)
    assert response.status_code == 200
    html = response.text
    assert 'Scope: <strong id="scope">every tenant</strong>' in html
    assert card(html, "pending") == "3"
    assert card(html, "claimed") == "1"
    assert card(html, "dead") == "1"
    assert float(card(html, "oldest").split()[0]) >= 0
    lag = card(html, "lag")
    assert float(lag.split()[0]) >= 30 and "(1 pending)" in html
    # Attempts per minute, the last hour: a point per minute, the current one last.
    done = points(html, "attempts", "done")
    assert len(done) == 60 and done[-1] == 1 and sum(done) == 2
    assert sum(points(html, "attempts", "dead")) == 1
    assert card(html, "done") == "2"
    assert html.count('<svg width="640"') == 5  # the charts: inline SVG, drawn by the server
    day = operator.client.get(URL, {"window": "day"}).text
    assert len(points(day, "attempts", "done")) == 144 and sum(points(day, "attempts", "done")) == 3
    assert card(day, "done") == "3"
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing loads from elsewhere
    # Live workers with their heartbeat and what they hold; the offline one is gone.
    workers = re.search(r'<table id="workers">(.*?)</table>', html, re.S)
    assert workers and "w-live" in workers.group(1) and "w-old" not in workers.group(1)
    assert re.search(r"w-live</td>.*?<td class=\"num\">1</td></tr>", workers.group(1), re.S)
    depth = re.search(r'<table id="depth">(.*?)</table>', html, re.S)
    assert depth and "held" in depth.group(1) and "fast" in depth.group(1)


def test_tenant_staff_see_their_tenants_figures_only(site) -> None:
    a, b, _ = site
    html = a.client.get(URL).text
    assert card(html, "pending") == "2"  # not B's
    assert card(html, "claimed") == "1"
    assert card(html, "dead") == "1"
    assert sum(points(html, "attempts", "done")) == 0  # B's completions are B's
    assert sum(points(html, "attempts", "dead")) == 1
    assert 'id="workers"' not in html  # workers serve every tenant: not a tenant's to see
    holders = re.search(r'<table id="holders">(.*?)</table>', html, re.S)
    assert holders and "w-live" in holders.group(1)
    other = b.client.get(URL).text
    assert card(other, "claimed") == "0" and "w-live" not in other
    assert sum(points(other, "attempts", "done")) == 2
    assert "(0 pending)" in other  # A's outbox row is A's


def test_only_the_operator_and_tenant_staff_see_the_gauges(member, site) -> None:
    assert member(role=Role.MEMBER).client.get(URL).status_code == 403
    plain = member(staff=False).client.get(URL)
    assert plain.status_code == 302 and "/admin/login/" in plain["Location"]


def test_the_worker_list_reads_only_the_system_login(operator: Person, site) -> None:
    """The gauges' per-tenant read runs the same statements under row-level security."""
    a, _, _ = site
    assert Worker.objects.using("system").filter(state=WorkerState.RUNNING).count() == 1
    assert runtime.read_gauges_of(a.org_id).failed == 1
    assert runtime.read_gauges_of(None).failed == 1
    assert [h.claimed_by for h in runtime.read_holders(org_id=a.org_id)] == ["w-live"]
    assert sum(s.done for s in runtime.read_minutes(org_id=a.org_id).total()) == 0
    assert sum(s.done for s in runtime.read_minutes().total()) == 2


def test_the_operator_sees_each_lanes_deepest_tenants_with_their_share(operator: Person, member):  # type: ignore[no-untyped-def]
    from workqueue.models import TenantShare

    deep, shallow = member(), member()
    TenantShare.objects.using("admin").create(org_id=deep.org_id, weight=3, max_in_flight=7)
    api.enqueue_many(deep.ctx, [api.NewItem("NOOP", {}) for _ in range(5)])
    api.enqueue(shallow.ctx, "NOOP", {})
    page = operator.client.get("/admin/workqueue_workers/queuegauges/").content.decode()
    table = page[page.index('id="top-tenants"') :]
    first, second = table.index('<td class="num">1</td>'), table.index('<td class="num">2</td>')
    assert first < second
    assert ">5</td>" in table and ">3</td>" in table and ">7</td>" in table


def test_the_operator_sets_a_share_and_the_tenants_staff_read_it(operator: Person, member):  # type: ignore[no-untyped-def]
    from workqueue.models import TenantShare

    staff = member()
    answer = operator.client.post(
        "/admin/workqueue/tenantshare/add/",
        {"org_id": str(staff.org_id), "weight": "2", "max_in_flight": "4"},
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    share = TenantShare.objects.using("admin").get(org_id=staff.org_id)
    assert (share.weight, share.max_in_flight) == (2.0, 4)
    seen = staff.client.get("/admin/workqueue/tenantshare/").content.decode()
    assert ">4</td>" in seen
    # Staff read their share; only the operator writes one.
    assert staff.client.post(
        f"/admin/workqueue/tenantshare/{staff.org_id}/change/", {"weight": "1000"}
    ).status_code in (302, 403)
    assert TenantShare.objects.using("admin").get(org_id=staff.org_id).weight == 2.0
    other = member()
    assert staff.client.get(f"/admin/workqueue/tenantshare/{other.org_id}/change/").status_code in (
        302,
        404,
    )


def test_the_charts_narrow_to_a_lane_and_refuse_what_is_not_one(operator: Person, site) -> None:
    fast = operator.client.get(URL, {"lane": "fast"}).text
    assert sum(points(fast, "attempts", "done")) == 2 and sum(points(fast, "attempts", "dead")) == 0
    assert re.findall(r'<a class="series"[^>]* data-series="([^"]+)"', fast).count("fast") == 1
    assert "lane=fast" in re.search(r'id="card-done"><a class="n" href="([^"]+)"', fast).group(1)
    # A series links to the list it counts, in the chart's lane.
    legend = re.search(r'<figure class="wq-chart" id="chart-attempts">.*?</figure>', fast, re.S)
    assert legend and "status__exact=done&amp;lane=fast" in legend.group(0)
    odd = operator.client.get(URL, {"lane": "<b>no</b>", "window": "week"}).text
    assert "<b>no</b>" not in odd and "The last hour" in odd
    assert len(points(odd, "attempts", "done")) == 60
