"""The gauges page's charts in a real browser, after a real drain with failures.

A real ``runworker`` drains a lane of a flaky kind (items that succeed, fail once and then
succeed, fail for good, or fail until their attempts are spent) and runs the sweep, which rolls
the attempts up; a real ``runserver`` draws the page. Debian's Chromium opens it in the admin's
light and dark themes: each chart has a point per minute of the hour (per ten minutes of the
day) carrying what the drain did, its lines in the admin's colours of that theme, and its
series link to the lists they count. A tenant's staff see their tenant's figures only. The
screenshots (``tests/e2e/screenshots/gauges-charts-*.png``) are the documentation's.
"""

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
    PASSWORD,
    SHOTS,
    free_port,
    stop,
    wait_for,
)
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import queue_settings
from tests.runtime.subprocess_kinds import FLAKY
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue import api
from workqueue.minutes import WAIT_BOUNDS_S
from workqueue.models import LaneMinute, Status, WorkItem

pytestmark = [
    pytest.mark.usefixtures("committed"),
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian's chromium is not installed: apt-get install chromium"
    ),
]

# Items that wait in a lane no worker serves: the depth chart's.
PARKED_LANE = "e2e-charts-parked"
PARKED = 4
# The drain, tenant A's: what each item does, how many of them.
RUNS = [({}, 6), ({"fail_first": 1}, 3), ({"permanent": True}, 2), ({"fail_first": 5}, 1)]
# What the attempts come to: 6 + 3 done (and B's 2); 3 + 2 + 3 failed; 2 + 1 dead letters.
DONE, FAILED, DEAD, B_DONE = 9, 8, 3, 2
# The admin's --link-fg, the "done" series' colour, in each theme (base.css, dark_mode.css).
LINK_FG = {"light": "rgb(65, 120, 147)", "dark": "rgb(129, 212, 250)"}


def _member() -> tuple[Any, OpContext]:
    user = UserFactory(is_staff=True)
    user.set_password(PASSWORD)
    user.save(using="admin")
    membership = MembershipFactory(user=user, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, user.pk, Role.ADMIN, new_request_context(AppType.WEB))
    return user, ctx


def _wait(what: str, ready: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.2)
        connections.close_all()


def _rolled_up() -> dict[str, int]:
    rows = LaneMinute.objects.using("admin")
    return {
        "done": sum(r.done for r in rows),
        "failed": sum(r.failed for r in rows),
        "dead": sum(r.dead for r in rows),
    }


@pytest.fixture
def drained() -> Iterator[tuple[str, Any, Any]]:
    """Tenant A's drain with failures and parked items, tenant B's two items, drained by a real
    worker that sweeps every second; a real web server. Yields its URL, the operator and B's
    staff member, once every item ended and the sweep rolled every attempt up."""
    operator = UserFactory(is_staff=True, is_superuser=True)
    operator.set_password(PASSWORD)
    operator.save(using="admin")
    _, a = _member()
    b_user, b = _member()
    with queue_settings(LANES=["default", PARKED_LANE]):
        for _ in range(PARKED):
            api.enqueue(a, "NOOP", {}, lane=PARKED_LANE)
    for payload, n in RUNS:
        for _ in range(n):
            api.enqueue(a, FLAKY.name, payload)
    for _ in range(B_DONE):
        api.enqueue(b, FLAKY.name, {})
    connections.close_all()
    env = subprocess_env(
        handlers=True, DEBUG="true", SWEEP_INTERVAL_S="1", WORKQUEUE_LANES=f"default,{PARKED_LANE}"
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
        [PYTHON, "manage.py", "runworker", FLAKY.name, "--metrics-port", "-1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        ended = (Status.DONE, Status.FAILED)
        flaky = WorkItem.objects.using("admin").filter(kind=FLAKY.name)
        _wait("the drain", lambda: flaky.exclude(status__in=ended).count() == 0)
        want = {"done": DONE + B_DONE, "failed": FAILED, "dead": DEAD}
        _wait("the rollup", lambda: _rolled_up() == want)
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/admin/login/", web)
        yield base, operator, b_user
    finally:
        stop(worker)
        stop(web)


def _values(page: Any, chart: str, series: str) -> list[float]:
    circles = page.locator(f"#{chart} a.series[data-series='{series}'] circle")
    return [float(v) for v in circles.evaluate_all("cs => cs.map(c => c.dataset.value)")]


def _sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def test_the_charts_show_the_drain_in_light_and_dark(drained, monkeypatch) -> None:
    base, operator, b_user = drained
    SHOTS.mkdir(parents=True, exist_ok=True)
    # Playwright's sync API runs an event loop on this thread; the test reads the database
    # only before the pages.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for theme in ("light", "dark"):
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, color_scheme=theme)
            page.set_default_timeout(15_000)
            _sign_in(page, base, operator.username)
            page.goto(f"{base}/admin/workqueue_workers/queuegauges/")
            # Attempts per minute: a point per minute of the hour, each series summing to what
            # the drain did.
            for series, total in (("done", DONE + B_DONE), ("failed", FAILED), ("dead", DEAD)):
                values = _values(page, "chart-attempts", series)
                assert len(values) == 60 and sum(values) == total, (theme, series, values)
            expect(page.locator("#card-done .n")).to_have_text(str(DONE + B_DONE))
            # The wait before a claim: p50 and p95 where claims ended their item, each a bound.
            p50 = _values(page, "chart-waits", "p50")
            p95 = _values(page, "chart-waits", "p95")
            assert p50 and len(p50) == len(p95) <= 60
            assert all(a <= b and a in WAIT_BOUNDS_S for a, b in zip(p50, p95, strict=True))
            # Pending by lane: the parked lane's items, counted at a minute's first sweep.
            assert max(_values(page, "chart-depth", PARKED_LANE)) == PARKED
            # The admin's own colours, as the theme sets them.
            line = page.locator("#chart-attempts a.series[data-series='done'] path")
            stroke = line.evaluate("p => getComputedStyle(p).stroke")
            assert stroke == LINK_FG[theme], (theme, stroke)
            page.locator("#charts").scroll_into_view_if_needed()
            page.screenshot(path=SHOTS / f"gauges-charts-{theme}.png", full_page=True)
            page.locator(".wq-charts").screenshot(path=SHOTS / f"gauges-charts-only-{theme}.png")
            page.close()

        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(15_000)
        _sign_in(page, base, operator.username)
        # The last day: a point per ten minutes, the same totals.
        page.goto(f"{base}/admin/workqueue_workers/queuegauges/?window=day")
        done = _values(page, "chart-attempts", "done")
        assert len(done) == 144 and sum(done) == DONE + B_DONE
        page.screenshot(path=SHOTS / "gauges-charts-day.png", full_page=True)
        # A series is a link to the list it counts: the dead letters failed in the window.
        page.click("#chart-attempts figcaption a[data-series='dead']")
        expect(page.locator("#result_list tbody tr")).to_have_count(DEAD)
        page.close()

        # Tenant B's staff see B's figures only: two done, nothing failed.
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(15_000)
        _sign_in(page, base, b_user.username)
        page.goto(f"{base}/admin/workqueue_workers/queuegauges/")
        assert sum(_values(page, "chart-attempts", "done")) == B_DONE
        assert sum(_values(page, "chart-attempts", "failed")) == 0
        assert sum(_values(page, "chart-attempts", "dead")) == 0
        page.close()
        browser.close()
    shots = sorted(SHOTS.glob("gauges-charts-*.png"))
    assert len(shots) == 5 and all(shot.stat().st_size > 10_000 for shot in shots)
