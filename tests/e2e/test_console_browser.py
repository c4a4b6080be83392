"""The operator's console in a real browser: the items list finds one item among 20,000 by a
payload field through an index on that expression, and warns (searching the newest items only)
without one; the workers page shows a real running worker, what it holds (linked to the item's
page), its drain and its forced stop; the gauges page charts the oldest waiting by lane and kind
and the run time by kind. Each page is a screenshot in docs/assets/screenshots/, in the light and
dark themes."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tests.e2e.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    MARKS,
    PASSWORD,
    SHOTS,
    free_port,
    stop,
    wait_for,
)
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import insert_items, payload_index, queue_settings
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workers.models import Worker, WorkerState
from workqueue import api
from workqueue.models import KindMinute, Status, WorkItem

pytestmark = MARKS

ITEMS = 20_000
WANTED = 12_345
# Items that wait in a lane no worker serves: the oldest-waiting chart's.
PARKED_LANE = "e2e-console-parked"
THEMES = ("light", "dark")


def _wait(what: str, ready: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.2)
        connections.close_all()


@pytest.fixture
def console() -> Iterator[tuple[str, Any, OpContext, subprocess.Popen[str]]]:
    """20,000 done items of one tenant (one INSERT), two parked items and one the worker holds
    (it sleeps), a real worker that sweeps every second, a real web server."""
    operator = UserFactory(is_staff=True, is_superuser=True)
    operator.set_password(PASSWORD)
    operator.save(using="admin")
    member = UserFactory(is_staff=True)
    membership = MembershipFactory(user=member, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, member.pk, Role.ADMIN, new_request_context(AppType.WEB))
    insert_items(ctx.org_id, ITEMS)
    with connections["admin"].cursor() as cursor:
        cursor.execute("ANALYZE workqueue_workitem")
    with queue_settings(LANES=["default", PARKED_LANE]):
        for _ in range(2):
            api.enqueue(ctx, "NOOP", {}, lane=PARKED_LANE)
    for _ in range(3):
        api.enqueue(ctx, "NOOP", {})
    api.enqueue(ctx, "NOOP", {"sleep_s": 300})
    connections.close_all()
    env = subprocess_env(
        DEBUG="true",
        SWEEP_INTERVAL_S="1",
        # Done items stay in the hot table while the page is searched: with a pass a second, the
        # sweep would move the inserted ones into history midway (history's searches have tests
        # of their own).
        HISTORY_AFTER_S="3600",
        WORKER_HEARTBEAT_INTERVAL_S="0.5",
        # The drain would let the sleeping item run this long: the operator's stop cuts it short.
        WORKER_SHUTDOWN_GRACE_S="600",
        WORKQUEUE_LANES=f"default,{PARKED_LANE}",
    )
    port = free_port()
    web = subprocess.Popen(
        [PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    worker = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "NOOP", "--metrics-port", "-1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        items = WorkItem.objects.using("admin").filter(kind="NOOP", lane="default")
        _wait("the worker's claim", lambda: items.filter(status=Status.CLAIMED).count() == 1)
        _wait("the others done", lambda: items.filter(status=Status.PENDING).count() == 0)
        rolled = KindMinute.objects.using("admin")
        _wait("the kinds' minutes", lambda: rolled.exclude(oldest_wait_s=None).exists())
        _wait("the run times", lambda: any(sum(m.runs) for m in rolled.all()))
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/admin/login/", web)
        yield base, operator, ctx, worker
    finally:
        stop(worker)
        stop(web)


def _sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def _search(page: Any, base: str, q: str) -> float:
    """Search the items list as an operator types it; the seconds the page took."""
    page.goto(f"{base}/admin/workqueue/workitem/")
    page.fill("#searchbar", q)
    started = time.monotonic()
    page.press("#searchbar", "Enter")
    page.wait_for_load_state("load")
    return time.monotonic() - started


def test_the_console_finds_one_item_shows_the_workers_and_charts(console, monkeypatch) -> None:
    base, operator, ctx, worker = console
    wanted = WorkItem.objects.using("admin").get(org_id=ctx.org_id, payload__n=WANTED)
    held = WorkItem.objects.using("admin").get(status=Status.CLAIMED)
    worker_id = held.claimed_by
    connections.close_all()
    SHOTS.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for theme in THEMES:
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, color_scheme=theme)
            page.set_default_timeout(15_000)
            _sign_in(page, base, operator.username)

            # Without an index: the newest items are searched, and the page says so.
            _search(page, base, f"payload.n={WANTED}")
            expect(page.locator("ul.messagelist li.warning")).to_contain_text("no index serves")
            expect(page.locator("#scan-all")).to_be_visible()
            page.screenshot(path=SHOTS / f"console-items-scan-warning-{theme}.png", full_page=True)

            # With one (on the item table and every history child): the one item, at once.
            with payload_index("(payload ->> 'n')"):
                took = _search(page, base, f"payload.n={WANTED}")
                rows = page.locator("#result_list tbody tr")
                expect(rows).to_have_count(1)
                expect(page.locator("ul.messagelist li.warning")).to_have_count(0)
                assert page.locator(f"input[value='{wanted.id}']").count() == 1
                assert took < 5, took  # a bound for a busy machine; the plan is an index scan
                page.screenshot(path=SHOTS / f"console-items-search-{theme}.png", full_page=True)
            # The saved filters are links: oldest waiting lists the parked items first.
            page.goto(f"{base}/admin/workqueue/workitem/")
            page.click("#saved-filters a[data-filter='oldest-waiting']")
            expect(page.locator("#result_list tbody tr")).to_have_count(2)
            expect(page.locator("#result_list tbody tr").first).to_contain_text(PARKED_LANE)

            # The workers page: the real worker, what it holds, linked to the item's page.
            page.goto(f"{base}/admin/workqueue_workers/queuegauges/workers/")
            row = page.locator(f"tr.worker[data-worker='{worker_id}']")
            expect(row).to_have_attribute("data-holds", "1")
            expect(row.locator("td").nth(2)).to_have_text(str(worker.pid))
            expect(row.locator("a.held-item")).to_have_attribute(
                "href", f"/admin/workqueue/workitem/{held.id}/change/"
            )
            page.screenshot(path=SHOTS / f"console-workers-{theme}.png", full_page=True)

            # The charts: oldest waiting by lane and kind, run time by kind.
            page.goto(f"{base}/admin/workqueue_workers/queuegauges/")
            oldest = page.locator(f"#chart-oldest a.series[data-series='{PARKED_LANE}:NOOP']")
            expect(oldest).to_have_count(1)
            expect(page.locator("#chart-runs a.series[data-series='NOOP:p50']")).to_have_count(1)
            page.locator("#chart-oldest").scroll_into_view_if_needed()
            page.locator(".wq-charts").screenshot(path=SHOTS / f"console-charts-{theme}.png")
            page.close()

        # The drain: the worker reads it at its next heartbeat and stops claiming.
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(15_000)
        _sign_in(page, base, operator.username)
        page.goto(f"{base}/admin/workqueue_workers/queuegauges/workers/")
        page.locator(f"tr.worker[data-worker='{worker_id}'] input.drain").click()
        expect(page.locator("ul.messagelist li.success")).to_contain_text("asked to drain")
        # Draining, it still runs the sleeping item (a grace of ten minutes): stop it now,
        # through the page's confirmation.
        row = page.locator(f"tr.worker[data-worker='{worker_id}']")
        expect(row.locator("input.drain")).to_have_count(0)
        page.on("dialog", lambda dialog: dialog.accept())
        row.locator("input.stop").click()
        expect(page.locator("ul.messagelist li.success")).to_contain_text("asked to stop now")
        page.close()
        browser.close()
    # The worker read the drain, then the stop, at its next beats: it cancelled and released
    # what it held, and went offline, as at a first SIGTERM and a second, without the grace.
    assert worker.wait(60) == 0
    assert Worker.objects.using("admin").get(pk=worker_id).state == WorkerState.OFFLINE
    assert WorkItem.objects.using("admin").get(pk=held.id).status == Status.PENDING
    shots = sorted(SHOTS.glob("console-*.png"))
    assert len(shots) == 8 and all(shot.stat().st_size > 10_000 for shot in shots)
