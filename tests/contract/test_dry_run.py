"""Dry-running a dead letter's requeue: the handler runs in a transaction that is rolled back,
and the report says what it would have written, emitted, enqueued and mailed."""

from __future__ import annotations

import io
import uuid

import pytest
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import AuditEntry
from outbox.api import emit
from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from tests.helpers import row
from workers.demo.models import Shipment
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Status
from workqueue.settle import fail
from workqueue.triage.dry_run import dry_run

KIND = "TEST_DRY_RUN"

# The site's real mailer: SMTP to a port nothing listens on, so a message that got out would
# fail the handler instead of passing unseen.
pytestmark = pytest.mark.usefixtures("smtp_mailer")


@pytest.fixture
def smtp_mailer(settings):  # type: ignore[no-untyped-def]
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": 9, "timeout": 2},
        }
    }


class DryRunPayload(api.Payload):
    reference: str
    fail: bool = False


api.register(api.Kind(KIND, DryRunPayload, max_attempts=1))


@api.handles(KIND)
class DryRunHandler:
    def handle(self, ctx: OpContext, item: api.WorkItem, run: api.Run) -> dict[str, str]:
        with tenant_scope(ctx.org_id) as using:
            Shipment.objects.using(using).create(
                org_id=ctx.org_id, reference=item.payload["reference"], recipient_email="a@b.c"
            )
        emit(ctx, "shipment_booked", {"reference": item.payload["reference"]})
        api.enqueue(ctx, "NOOP", {"n": 7})
        mail.send_mail("booked", "your parcel", "shop@example.com", ["you@example.com"])
        if item.payload["fail"]:
            raise api.PermanentError("the carrier refused the parcel")
        return {"dry_run": str(run.dry_run)}


def _dead(ctx: OpContext, worker_rctx, payload: dict) -> api.WorkItem:  # type: ignore[no-untyped-def]
    lane = f"dry-{uuid.uuid4().hex[:8]}"
    api.enqueue(ctx, KIND, payload, lane=lane)
    [(item_ctx, held)] = claim(worker_rctx, lane, [KIND], "w1", 30, 10)
    return fail(item_ctx, held, "boom", permanent=True)


def _committed_counts(org_id: uuid.UUID) -> tuple[int, int, int]:
    """Shipments, outbox rows and items of the tenant, read by another connection (the owner's)."""
    from outbox.models import OutboxRow
    from workqueue.models import WorkItem

    return (
        Shipment.objects.using("admin").filter(org_id=org_id).count(),
        OutboxRow.objects.using("admin").filter(org_id=org_id).count(),
        WorkItem.objects.using("admin").filter(org_id=org_id).count(),
    )


def test_the_handlers_writes_are_reported_and_not_committed(ctx: OpContext, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    dead = _dead(ctx, worker_rctx, {"reference": "R-1"})
    before = _committed_counts(ctx.org_id)
    mail.outbox = []
    report = dry_run(ctx.user_id, dead.id)
    assert report.succeeded, report.traceback
    assert report.result == {"dry_run": "True"}
    written = {w.table: w for w in report.written}
    assert written["workqueue_demo_shipment"].inserted == 1
    assert written["workqueue_outbox_outboxrow"].inserted == 1
    assert written["workqueue_workitem"].inserted == 1
    assert report.emitted == [{"kind": "shipment_booked", "payload": {"reference": "R-1"}}]
    [enqueued] = report.enqueued
    assert (enqueued["kind"], enqueued["payload"]) == ("NOOP", {"n": 7})
    assert report.mail == [
        {"subject": "booked", "to": ["you@example.com"], "from": "shop@example.com"}
    ]
    # Nothing was committed, and the item is still the dead letter it was.
    assert _committed_counts(ctx.org_id) == before
    assert mail.outbox == []
    now = row(dead.id)
    assert (now.status, now.attempts, now.updated_at) == (Status.FAILED, 1, dead.updated_at)
    [entry] = AuditEntry.objects.using("admin").filter(
        subject_id=str(dead.id), action="work.dry_run"
    )
    assert entry.actor == ctx.user_id
    assert entry.data["succeeded"] is True and entry.data["written"]["workqueue_demo_shipment"] == 1


def test_an_edited_payload_is_validated_first_and_an_invalid_one_runs_nothing(
    ctx: OpContext, worker_rctx
) -> None:  # type: ignore[no-untyped-def]
    dead = _dead(ctx, worker_rctx, {"reference": "R-2", "fail": True})
    before = _committed_counts(ctx.org_id)
    with pytest.raises(api.InvalidPayload, match="reference"):
        dry_run(ctx.user_id, dead.id, {"fail": False})
    assert _committed_counts(ctx.org_id) == before
    assert not AuditEntry.objects.using("admin").filter(action="work.dry_run").exists()
    # A valid edit runs with the edited payload.
    report = dry_run(ctx.user_id, dead.id, {"reference": "R-3"})
    assert report.succeeded and report.edited
    assert report.emitted[0]["payload"] == {"reference": "R-3"}
    assert _committed_counts(ctx.org_id) == before
    assert row(dead.id).payload == {"reference": "R-2", "fail": True}


def test_a_failing_handler_reports_its_error_and_what_it_wrote_first(
    ctx: OpContext, worker_rctx
) -> None:  # type: ignore[no-untyped-def]
    dead = _dead(ctx, worker_rctx, {"reference": "R-4", "fail": True})
    before = _committed_counts(ctx.org_id)
    report = dry_run(ctx.user_id, dead.id)
    assert not report.succeeded
    assert report.error == "PermanentError: the carrier refused the parcel"
    assert "DryRunHandler" in report.traceback or "handle" in report.traceback
    assert {w.table for w in report.written} >= {"workqueue_demo_shipment"}
    assert _committed_counts(ctx.org_id) == before


def test_the_command_prints_the_report_and_exits_1_when_the_handler_would_fail(
    ctx: OpContext, worker_rctx
) -> None:  # type: ignore[no-untyped-def]
    good = _dead(ctx, worker_rctx, {"reference": "R-5"})
    out = io.StringIO()
    call_command("queue", "dry-run", str(good.id), stdout=out)
    assert "would succeed" in out.getvalue()
    assert "workqueue_demo_shipment: 1 inserted" in out.getvalue()
    bad = _dead(ctx, worker_rctx, {"reference": "R-6", "fail": True})
    with pytest.raises(CommandError, match="would fail") as raised:
        call_command("queue", "dry-run", str(bad.id), stdout=io.StringIO())
    assert raised.value.returncode == 1
    with pytest.raises(CommandError, match="reference"):
        call_command("queue", "dry-run", str(good.id), "--payload", '{"fail": true}')
    with pytest.raises(CommandError, match="--payload: not JSON"):
        call_command("queue", "dry-run", str(good.id), "--payload", "{")
    assert Shipment.objects.using("admin").filter(org_id=ctx.org_id).count() == 0


def test_mail_is_kept_for_the_dry_runs_thread_only(settings) -> None:  # type: ignore[no-untyped-def]
    import threading

    from workqueue.triage.dry_run import _keep_mail

    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    mail.outbox = []

    def elsewhere() -> None:
        mail.send_mail("other", "a request's mail", "shop@example.com", ["b@example.com"])

    with _keep_mail() as kept:
        mail.send_mail("dry", "kept", "shop@example.com", ["a@example.com"])
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    mail.send_mail("after", "sent", "shop@example.com", ["c@example.com"])
    assert [m.subject for m in kept] == ["dry"]
    assert [m.subject for m in mail.outbox] == ["other", "after"]
