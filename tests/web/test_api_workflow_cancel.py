"""POST /api/workflows/<id>/cancel: the member's workflow cancelled, each step audited."""

from __future__ import annotations

import uuid

import pytest

from audit.models import AuditEntry
from tests.helpers import row
from tests.web.conftest import Person
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Status

pytestmark = pytest.mark.usefixtures("committed")


def cancel(person: Person, workflow_id: object, body: str = ""):  # type: ignore[no-untyped-def]
    return person.client.post(
        f"/api/workflows/{workflow_id}/cancel", body, content_type="application/json"
    )


@pytest.fixture
def alice(member) -> Person:  # type: ignore[no-untyped-def]
    return member(role="member", staff=False)


def _chain(person: Person):  # type: ignore[no-untyped-def]
    wf = api.Workflow()
    wf.chain(*(api.NewItem("NOOP", {"n": n}) for n in range(3)))
    return api.enqueue_workflow(person.ctx, wf)


def test_a_workflow_is_cancelled_with_its_reason_and_audited(alice: Person, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    declared = _chain(alice)
    claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    response = cancel(alice, declared.workflow_id, '{"reason": "order withdrawn"}')
    assert response.status_code == 200, response.content
    assert response.json() == {
        "workflow_id": str(declared.workflow_id),
        "cancelled": 2,
        "cancel_requested": 1,
    }
    first, *rest = declared.ids
    assert row(first).cancel_requested_at is not None
    for step in rest:
        assert (row(step).status, row(step).last_error) == (Status.CANCELLED, "order withdrawn")
    entries = AuditEntry.objects.using("admin").filter(subject_id__in=[str(i) for i in rest])
    assert {(e.action, e.actor, e.data["reason"]) for e in entries} == {
        ("work.cancelled", str(alice.user.pk), "order withdrawn")
    }
    item = alice.client.get(f"/api/work/{first}").json()["item"]
    assert item["workflow_id"] == str(declared.workflow_id)


def test_only_the_declarer_or_an_admin_and_never_another_tenant(alice: Person, member) -> None:  # type: ignore[no-untyped-def]
    from tenancy.models import Org

    org = Org.objects.using("admin").get(pk=alice.org_id)
    bob = member(org=org, role="member", staff=False)
    boss = member(org=org, role="admin", staff=False)
    mallory = member(role="owner", staff=False)
    declared = _chain(alice)
    for target in (declared.workflow_id, uuid.uuid4(), "not-a-uuid"):
        assert cancel(mallory, target).status_code == 404
    refused = cancel(bob, declared.workflow_id)
    assert refused.status_code == 403 and refused.json()["field"] == "role"
    assert cancel(alice, declared.workflow_id, '{"why": "no"}').status_code == 400
    assert cancel(alice, declared.workflow_id, '{"reason": ""}').status_code == 400
    assert {row(i).status for i in declared.ids} == {Status.PENDING, Status.WAITING}
    assert cancel(boss, declared.workflow_id).json()["cancelled"] == 3
    assert {row(i).last_error for i in declared.ids} == {"workflow cancelled"}
