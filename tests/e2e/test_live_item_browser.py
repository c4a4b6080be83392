"""A running item's page in a real browser keeps its status, attempts and progress up to date
without a reload (it asks the item's live endpoint while it is in view), and reloads once when
the item finishes, to show its result. The item is held by this test through the real claim,
and its progress is written through the real fenced statement, as a worker's handler would."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from django.db import connections

from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tests.e2e.support import CHROMIUM, CHROMIUM_ARGS, MARKS, PASSWORD, free_port, stop, wait_for
from tests.factories import MembershipFactory, UserFactory
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue import api
from workqueue.claim import claim
from workqueue.fence import Fence
from workqueue.progress import Reported, write_progress
from workqueue.settle import complete_many

pytestmark = MARKS

LANE = "live-page"
# A poll lands within seconds; a loaded machine may take longer (a bound, not a timing).
WAIT_MS = 60_000


@pytest.fixture
def web() -> Iterator[str]:
    """A real web server on the test database, and no worker: the test holds the item."""
    connections.close_all()
    port = free_port()
    server = subprocess.Popen(
        [PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=subprocess_env(DEBUG="true"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/admin/login/", server)
        yield base
    finally:
        stop(server)


def _report(fence: Fence, done: int, total: int, note: str) -> None:
    written = write_progress(
        [Reported(fence, f'{{"done": {done}, "total": {total}, "note": "{note}"}}', None)]
    )
    assert written == {fence.item_id}


def test_a_running_items_progress_moves_on_its_page_without_a_reload(
    web: str, worker_rctx, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    staff = UserFactory(is_staff=True)
    staff.set_password(PASSWORD)
    staff.save(using="admin")
    membership = MembershipFactory(user=staff, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, staff.pk, Role.ADMIN, new_request_context(AppType.WEB))
    item, _ = api.enqueue(ctx, "NOOP", {"n": 1}, lane=LANE)
    [(_, held)] = claim(worker_rctx, LANE, None, "live-test", 300, 1)
    fence = Fence.of(held)
    _report(fence, 10, 100, "rows")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(f"{web}/admin/login/")
        page.fill("#id_username", staff.username)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{web}/admin/workqueue/workitem/{item.id}/change/")
        expect(page.locator("#live-status")).to_contain_text("Claimed, attempt 1", timeout=WAIT_MS)
        expect(page.locator("#progress-now .progress-line")).to_contain_text(
            "10 / 100 (10%)", timeout=WAIT_MS
        )
        # A mark that a reload would wipe out.
        page.evaluate("window.wqMark = 'same page'")
        _report(fence, 60, 100, "rows")
        expect(page.locator("#progress-now .progress-line")).to_contain_text(
            "60 / 100 (60%)", timeout=WAIT_MS
        )
        assert page.evaluate("document.querySelector('#progress-now progress').value") == 0.6
        assert page.evaluate("window.wqMark") == "same page"
        # Finished: the page reloads once, to show it done (and asks no more).
        complete_many([fence], ['{"rows": 100}'])
        expect(page.locator("#live-status")).to_contain_text("Done, attempt 1", timeout=WAIT_MS)
        assert page.evaluate("window.wqMark === undefined")
        assert page.locator("#live-note").count() == 0
        # Another tenant's item is a 404 for this staff member's page and its live endpoint.
        other = OpContext(
            MembershipFactory(role=Role.ADMIN).org_id,
            "x",
            Role.ADMIN,
            new_request_context(AppType.WEB),
        )
        theirs, _ = api.enqueue(other, "NOOP", {"n": 2}, lane=LANE)
        answer = page.request.get(f"{web}/admin/workqueue/workitem/{theirs.id}/live/")
        assert answer.status == 404
        browser.close()


def test_a_workflows_counts_move_on_its_page_without_a_reload(
    web: str, worker_rctx, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from workqueue.workflows import Workflow

    staff = UserFactory(is_staff=True)
    staff.set_password(PASSWORD)
    staff.save(using="admin")
    membership = MembershipFactory(user=staff, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, staff.pk, Role.ADMIN, new_request_context(AppType.WEB))
    wf = Workflow()
    wf.group([api.NewItem("NOOP", {"n": n}, lane=LANE) for n in (1, 2)])
    declared = api.enqueue_workflow(ctx, wf)
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(f"{web}/admin/login/")
        page.fill("#id_username", staff.username)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{web}/admin/workqueue/workitem/workflow/{declared.workflow_id}/")
        expect(page.locator("#counts .count-pending .n")).to_have_text("2", timeout=WAIT_MS)
        page.evaluate("window.wqMark = 'same page'")
        for _ in range(2):
            [(_, held)] = claim(worker_rctx, LANE, None, "live-test", 300, 1)
            complete_many([Fence.of(held)], ['{"ok": true}'])
        expect(page.locator("#counts .count-done .n")).to_have_text("2", timeout=WAIT_MS)
        expect(page.locator("#counts")).to_have_attribute("data-live", "0", timeout=WAIT_MS)
        assert page.evaluate("window.wqMark") == "same page"
        browser.close()
