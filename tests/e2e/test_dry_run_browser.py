"""A dead letter's dry run in a real browser: the report lists the rows the handler would
write, nothing is committed (read afterwards by another connection), then the real requeue
with the edited payload in one click, its audit entry holding the payload before and after."""

from __future__ import annotations

import json

from audit.models import AuditEntry
from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tests.e2e.support import CHROMIUM, CHROMIUM_ARGS, MARKS, PASSWORD
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import dead_letter, row
from workers.demo.models import Shipment, ShipmentNotice
from workqueue.models import Status

pytestmark = MARKS


def test_dry_run_a_dead_letter_then_requeue_it_edited(
    servers: str, worker_rctx, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    staff = UserFactory(is_staff=True)
    staff.set_password(PASSWORD)
    staff.save(using="admin")
    membership = MembershipFactory(user=staff, role=Role.ADMIN)
    ctx = OpContext(membership.org_id, staff.pk, Role.ADMIN, new_request_context(AppType.WEB))
    shipment = Shipment.objects.using("admin").create(
        org_id=ctx.org_id, reference="DRY-1", recipient_email="r@example.com"
    )
    payload = {"shipment_id": str(shipment.id), "version": 1, "channel": "sms"}
    dead = dead_letter(
        ctx, worker_rctx, payload, error="PermanentError: sms gateway down", kind="NOTIFY_SHIPMENT"
    )
    from django.db import connections

    connections.close_all()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        page.goto(f"{servers}/admin/login/")
        page.fill("#id_username", staff.username)
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{servers}/admin/workqueue/deadletter/{dead.id}/change/")
        page.click("#dry-run-link")
        # An edit the kind's schema refuses: one message, nothing run.
        page.fill("#id_payload", json.dumps({"shipment_id": str(shipment.id), "version": 0}))
        page.click("#dry-run")
        expect(page.locator("#problem")).to_contain_text("version")
        expect(page.locator("#report")).to_have_count(0)
        # The edit that fixes it: the report lists what the handler would write.
        page.fill("#id_payload", json.dumps({**payload, "channel": "email"}))
        page.click("#dry-run")
        expect(page.locator("#outcome")).to_contain_text("would succeed")
        written = page.locator("#written")
        expect(written).to_contain_text("workqueue_demo_shipmentnotice")
        expect(written).to_contain_text("workqueue_demo_shipment")
        # Nothing of it was committed, and the item is still the dead letter it was.
        assert not ShipmentNotice.objects.using("admin").filter(shipment_id=shipment.id).exists()
        assert Shipment.objects.using("admin").get(pk=shipment.id).notified_version == 0
        assert row(dead.id).status == Status.FAILED
        dry = AuditEntry.objects.using("admin").get(subject_id=str(dead.id), action="work.dry_run")
        assert dry.actor == str(staff.pk) and dry.data["edited"] is True
        # The real requeue, one click from the report.
        page.click("#requeue")
        expect(page.locator(".messagelist")).to_contain_text("done for 1 item")
        browser.close()
    now = row(dead.id)
    assert now.status == Status.PENDING
    assert now.payload == {"shipment_id": str(shipment.id), "version": 1, "channel": "email"}
    entry = AuditEntry.objects.using("admin").get(
        subject_id=str(dead.id), action="work.requeued_edited"
    )
    assert entry.actor == str(staff.pk)
    assert entry.data["payload_before"]["channel"] == "sms"
    assert entry.data["payload"]["channel"] == "email"
