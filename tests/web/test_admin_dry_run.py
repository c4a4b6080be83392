"""The dead letter's dry-run page: fenced by tenant like every admin page, the report drawn,
an async handler refused with a message, and the operator's dry run of any tenant's item."""

from __future__ import annotations

import json

import pytest

from audit.models import AuditEntry
from tests.helpers import dead_letter, row
from tests.web.conftest import Person
from workers.demo.models import Shipment, ShipmentNotice
from workqueue.models import Status

pytestmark = pytest.mark.usefixtures("committed")


def _url(item) -> str:  # type: ignore[no-untyped-def]
    return f"/admin/workqueue/deadletter/{item.id}/dry-run/"


def _shipment_dead_letter(person: Person, worker_rctx):  # type: ignore[no-untyped-def]
    assert person.ctx is not None
    shipment = Shipment.objects.using("admin").create(
        org_id=person.ctx.org_id, reference="W-1", recipient_email="r@example.com"
    )
    payload = {"shipment_id": str(shipment.id), "version": 1}
    return shipment, dead_letter(person.ctx, worker_rctx, payload, kind="NOTIFY_SHIPMENT")


def test_staff_dry_run_their_dead_letter_and_nothing_is_committed(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    _, dead = _shipment_dead_letter(staff, worker_rctx)
    page = staff.client.get(_url(dead))
    assert page.status_code == 200 and b'id="dry-run"' in page.content
    report = staff.client.post(_url(dead), {"payload": json.dumps(dead.payload)})
    assert report.status_code == 200
    assert b"would succeed" in report.content
    assert b"workqueue_demo_shipmentnotice" in report.content
    assert b'value="requeue_now"' in report.content  # no edit: the plain requeue
    assert not ShipmentNotice.objects.using("admin").exists()
    assert row(dead.id).status == Status.FAILED
    assert (
        AuditEntry.objects.using("admin")
        .filter(subject_id=str(dead.id), action="work.dry_run", actor=str(staff.user.pk))
        .exists()
    )


def test_another_tenants_staff_get_a_404_and_run_nothing(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    owner, stranger = member(), member()
    _, dead = _shipment_dead_letter(owner, worker_rctx)
    assert stranger.client.post(_url(dead), {"payload": "{}"}).status_code == 404
    assert not AuditEntry.objects.using("admin").filter(action="work.dry_run").exists()


def test_an_async_handler_is_refused_with_a_message(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    assert staff.ctx is not None
    dead = dead_letter(staff.ctx, worker_rctx, {"n": 1}, kind="NOOP")
    page = staff.client.post(_url(dead), {"payload": '{"n": 1}'})
    assert page.status_code == 200
    assert b"its handler is async" in page.content and b'id="report"' not in page.content


def test_the_operator_dry_runs_any_tenants_dead_letter(
    member, operator: Person, worker_rctx
) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    _, dead = _shipment_dead_letter(staff, worker_rctx)
    report = operator.client.post(_url(dead), {"payload": "{"})
    assert b"payload: not valid JSON" in report.content
    report = operator.client.post(_url(dead), {"payload": '{"shipment_id": "x", "version": 1}'})
    assert b"shipment_id" in report.content and b'id="report"' not in report.content
    assert not AuditEntry.objects.using("admin").filter(action="work.dry_run").exists()
