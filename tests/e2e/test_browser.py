"""The product in a real browser: Debian's Chromium driven by Playwright, against a real
``runserver`` and a real ``runworker`` on the test database.

A tenant's staff member signs in, opens the dead letters, requeues one and sees it pending,
opens the gauges and finds their numbers, then books a shipment on the demo page and watches
its notice's work get done. Then a bad deploy: 250 dead letters of one kind and error are one
row of the grouped dead letters, requeued by one filter action, and the lane they wait in (no
worker serves it) is flagged on the gauges page. Each page is saved as a screenshot in
``docs/assets/screenshots/`` (git-ignored), where the documentation shows them: its pictures of
the admin are this test's, taken at its last run.
"""

from __future__ import annotations

from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tests.e2e.support import CHROMIUM, CHROMIUM_ARGS, MARKS, PASSWORD, SHOTS
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import dead_letter, many_dead, row
from workers.demo.models import Shipment, ShipmentNotice
from workqueue.models import Status

pytestmark = MARKS

# The requeued dead letter waits in a lane no worker here serves, so the page can find it
# pending (the worker would run a NOOP in the default lane within milliseconds).
PARKED_LANE = "e2e-parked"
BAD_DEPLOY = "PermanentError: shipment not found"
# This test's screenshots, numbered in the order it takes them (others are other tests').
OWN_SHOTS = "[0-9][0-9]-*.png"


def test_staff_triage_a_dead_letter_read_the_gauges_and_run_the_demo(
    servers: str, worker_rctx, monkeypatch
) -> None:
    staff = UserFactory(is_staff=True)
    staff.set_password(PASSWORD)
    staff.save(using="admin")
    membership = MembershipFactory(user=staff, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, staff.pk, Role.ADMIN, new_request_context(AppType.WEB))
    dead = dead_letter(ctx, worker_rctx, error="PermanentError: the gateway said no")
    from django.db import connections

    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_workitem SET lane = %s WHERE id = %s", [PARKED_LANE, dead.id]
        )
    connections.close_all()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob(OWN_SHOTS):
        old.unlink()
    # Playwright's sync API runs an event loop on this thread; the test reads the database
    # only between pages, never while a page loads.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)

        # Sign in to the admin as the tenant's staff member.
        page.goto(f"{servers}/admin/login/")
        page.fill("#id_username", staff.username)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        # Django's own admin index, with the queue's apps among the site's.
        expect(page.locator(".app-workqueue")).to_be_visible()
        page.screenshot(path=SHOTS / "01-admin.png", full_page=True)

        # The dead letters: the item is there with its error's first line.
        page.click(".app-workqueue >> text=Dead letters")
        expect(page.locator("#result_list")).to_contain_text("the gateway said no")
        page.screenshot(path=SHOTS / "02-dead-letters.png", full_page=True)
        page.click(f"#result_list a[href*='{dead.id}']")
        expect(page.locator("#last-error")).to_contain_text("PermanentError: the gateway said no")
        page.screenshot(path=SHOTS / "03-dead-letter.png", full_page=True)

        # Requeue it: a confirmation page first, then the list says it was done.
        page.click("button[value=requeue_now]")
        expect(page.locator("h1")).to_contain_text("Requeue now: confirm")
        page.screenshot(path=SHOTS / "04-confirm-requeue.png", full_page=True)
        page.click("input[type=submit][value^='Yes']")
        expect(page.locator(".messagelist")).to_contain_text("Requeue now: done for 1 item(s).")
        expect(page.locator("#result_list")).to_have_count(0)  # no dead letter left
        page.screenshot(path=SHOTS / "05-requeued.png", full_page=True)

        # It is pending again.
        page.goto(f"{servers}/admin/workqueue/workitem/{dead.id}/change/")
        expect(page.locator(".field-status")).to_contain_text("Pending")
        expect(page.locator("#history")).to_contain_text("work.requeued")
        page.screenshot(path=SHOTS / "06-pending.png", full_page=True)

        # The gauges, an entry of the admin's index: this tenant's numbers.
        page.goto(f"{servers}/admin/")
        page.click(".app-workqueue_workers >> text=Queue gauges")
        expect(page.locator("#card-pending .n")).to_have_text("1")
        expect(page.locator("#card-dead .n")).to_have_text("0")
        expect(page.locator("#chart-attempts a[data-series=done] circle")).to_have_count(60)
        page.screenshot(path=SHOTS / "07-gauges.png", full_page=True)

        # The demo: book a shipment; its notice's work goes through the outbox and the worker.
        page.goto(f"{servers}/demo/")
        page.fill("#id_reference", "E2E-1")
        page.fill("#id_recipient_email", "ann@example.com")
        page.select_option("#id_channel", "email")
        page.screenshot(path=SHOTS / "08-demo-form.png", full_page=True)
        page.click("#book button[type=submit]")
        expect(page.locator("#work-status")).to_have_text("done", timeout=30_000)
        expect(page.locator("#notices")).to_contain_text("email, version 1")
        page.screenshot(path=SHOTS / "09-demo-done.png", full_page=True)

        # A bad deploy: 250 dead letters of one kind and error (and 3 of another), grouped.
        bad = many_dead(ctx.org_id, 250, error=BAD_DEPLOY, lane=PARKED_LANE)
        many_dead(ctx.org_id, 3, error="RetryableError: gateway timeout", lane=PARKED_LANE)
        connections.close_all()
        page.goto(f"{servers}/admin/workqueue/deadletter/")
        page.click("#grouped-link")
        groups = page.locator("#groups tr.group")
        expect(groups).to_have_count(2)
        expect(groups.first).to_contain_text("250")
        expect(groups.first).to_contain_text(BAD_DEPLOY)
        page.screenshot(path=SHOTS / "10-grouped.png", full_page=True)

        # One click from the group to requeue them all: a confirmation page first.
        groups.first.locator("a.group-requeue").click()
        expect(page.locator("#matching-count")).to_contain_text("250")
        page.screenshot(path=SHOTS / "11-confirm-by-filter.png", full_page=True)
        page.click("#confirm-matching")
        expect(page.locator(".messagelist")).to_contain_text(
            "Requeue by filter: done for 250 item(s)."
        )
        page.screenshot(path=SHOTS / "12-requeued-by-filter.png", full_page=True)

        # They wait in a lane no live worker serves: the gauges page says so.
        page.goto(f"{servers}/admin/workqueue_workers/queuegauges/")
        flag = page.locator(f"#unserved li[data-lane='{PARKED_LANE}']")
        expect(flag).to_contain_text("251 items due")
        expect(page.locator("#card-unserved .n")).to_have_text("1")
        page.screenshot(path=SHOTS / "13-unserved-lane.png", full_page=True)
        browser.close()

    assert row(dead.id).status == Status.PENDING and row(dead.id).attempts == 0
    shipment = Shipment.objects.using("admin").get(reference="E2E-1")
    assert shipment.notified_version == 1
    assert ShipmentNotice.objects.using("admin").filter(shipment=shipment).count() == 1
    shots = sorted(SHOTS.glob(OWN_SHOTS))
    assert len(shots) == 13 and all(shot.stat().st_size > 10_000 for shot in shots)
    assert {row(i).status for i in bad} == {Status.PENDING}
