"""A workflow in a real browser: Debian's Chromium driven by Playwright, against a real
``runserver`` and real ``runworker`` processes on the test database.

A group of three with both callbacks runs; one member dies. A tenant's staff member opens a
callback's page, follows it to the workflow's page, sees its steps, counts and callbacks and
the dead member holding ``on_success``; the dead letters' list names the workflow it holds up;
they requeue the dead member from its triage page, a worker runs it, and the workflow's page
shows it going on to its end. Each page is saved in ``tests/e2e/screenshots/workflow/``.
"""

from __future__ import annotations

import time

from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tests.e2e.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    MARKS,
    PASSWORD,
    fresh_shots,
    start_worker,
    stop,
)
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import row
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Status
from workqueue.settle import fail
from workqueue.workflows import Workflow

pytestmark = MARKS

# The member that dies runs in a lane of its own: the test fails it before any worker serves
# that lane, and a worker started after serves its requeued run.
DYING_LANE = "e2e-wf-dying"
ERROR = "PermanentError: the gateway said no"


def _until(done, timeout_s: float = 60) -> None:  # type: ignore[no-untyped-def]
    """Wait for the workers to bring the rows to ``done()`` (a deadline, not a timed assert)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the workers did not get there"
        time.sleep(0.1)


def test_staff_follow_a_stuck_workflow_requeue_its_dead_step_and_see_it_go_on(
    servers: str, worker_rctx, monkeypatch
) -> None:
    staff = UserFactory(is_staff=True)
    staff.set_password(PASSWORD)
    staff.save(using="admin")
    membership = MembershipFactory(user=staff, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, staff.pk, Role.ADMIN, new_request_context(AppType.WEB))
    wf = Workflow()
    group = wf.group(
        [
            api.NewItem("NOOP", {"n": 1}, lane=DYING_LANE),
            api.NewItem("NOOP", {"n": 2}),
            api.NewItem("NOOP", {"n": 3}),
        ],
        on_success=api.NewItem("NOOP", {"n": 10}),
        on_complete=api.NewItem("NOOP", {"n": 11}),
    )
    declared = api.enqueue_workflow(ctx, wf)
    dying, success = declared[group.members[0]], declared[group.on_success]
    [(item_ctx, held)] = claim(worker_rctx, DYING_LANE, ["NOOP"], "e2e", 30, 1)
    assert held.id == dying
    fail(item_ctx, held, ERROR, permanent=True)
    # The server's worker runs the other members, then on_complete; on_success waits.
    _until(
        lambda: (
            {row(declared[s]).status for s in (*group.members[1:], group.on_complete)}
            == {Status.DONE}
        )
    )
    from django.db import connections

    connections.close_all()
    shots = fresh_shots("workflow")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    dying_worker = start_worker("NOOP", "--lane", DYING_LANE)

    from playwright.sync_api import expect, sync_playwright

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(15_000)
            page.goto(f"{servers}/admin/login/")
            page.fill("#id_username", staff.username)
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            expect(page.locator(".app-workqueue")).to_be_visible()

            # The waiting callback's page links to its workflow.
            page.goto(f"{servers}/admin/workqueue/workitem/{success}/change/")
            expect(page.locator("#workflow")).to_contain_text("It waits for 1 more")
            page.screenshot(path=shots / "01-callback.png", full_page=True)
            page.click("#workflow a.workflow-link")

            # The workflow: its five steps, counts, callbacks, and the dead member holding it.
            expect(page.locator("#counts h2")).to_have_text("5 steps")
            expect(page.locator("#steps tr.step")).to_have_count(5)
            expect(page.locator(".count-done .n")).to_have_text("3")
            expect(page.locator(".count-failed .n")).to_have_text("1")
            blocker = page.locator("#blockers li.blocker-failed")
            expect(blocker).to_have_count(1)
            expect(blocker).to_contain_text("steps[0]")
            expect(blocker).to_contain_text("is dead: 1 step waits on it")
            expect(page.locator("tr.callback-on_success .fired")).to_contain_text("not yet")
            expect(page.locator("tr.callback-on_complete .fired")).to_have_text("yes")
            expect(page.locator(f"#step-{dying} .status")).to_have_text("failed")
            page.screenshot(path=shots / "02-workflow-stuck.png", full_page=True)

            # The dead letters' list names the workflow it holds up.
            page.goto(f"{servers}/admin/workqueue/deadletter/")
            listed = page.locator("#result_list tbody tr")
            expect(listed).to_have_count(1)
            expect(listed).to_contain_text("1 waiting")
            page.screenshot(path=shots / "03-dead-letters.png", full_page=True)

            # Its triage page, from the workflow's blocker: requeue it (a confirmation first).
            page.go_back()
            page.click("#blockers a.blocker-link")
            expect(page.locator("#holding")).to_contain_text("need it done")
            expect(page.locator("#last-error")).to_contain_text(ERROR)
            page.screenshot(path=shots / "04-dead-step.png", full_page=True)
            page.click("button[value=requeue_now]")
            expect(page.locator("h1")).to_contain_text("Requeue now: confirm")
            page.click("input[type=submit][value^='Yes']")
            expect(page.locator(".messagelist")).to_contain_text("Requeue now: done for 1 item(s).")

            # A worker of its lane runs it; on_success follows: the workflow went on.
            _until(lambda: row(success).status == Status.DONE)
            page.goto(f"{servers}/admin/workqueue/workitem/workflow/{declared.workflow_id}/")
            expect(page.locator(".count-done .n")).to_have_text("5")
            expect(page.locator("#blockers")).to_contain_text("Nothing")
            expect(page.locator("tr.callback-on_success .fired")).to_have_text("yes")
            expect(page.locator("#cancel-workflow")).to_have_count(0)
            page.screenshot(path=shots / "05-workflow-done.png", full_page=True)
            browser.close()
    finally:
        stop(dying_worker)

    assert {row(i).status for i in declared.ids} == {Status.DONE}
    assert row(dying).attempts == 1  # requeued: its attempts started again
    saved = sorted(shots.glob("*.png"))
    assert len(saved) == 5 and all(shot.stat().st_size > 10_000 for shot in saved)
