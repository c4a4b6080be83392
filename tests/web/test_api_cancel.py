"""POST /api/work/<id>/cancel: every answer, each change with its audit entry."""

from __future__ import annotations

import uuid

import pytest

from audit.models import AuditEntry
from tests.helpers import row
from tests.web.conftest import Person, signed_in
from workqueue import api
from workqueue.cancel import is_cancel_requested
from workqueue.claim import claim
from workqueue.models import Status
from workqueue.settle import complete

pytestmark = pytest.mark.usefixtures("committed")


def cancel(person: Person, item_id: object, body: str = "", **headers):  # type: ignore[no-untyped-def]
    return person.client.post(
        f"/api/work/{item_id}/cancel", body, content_type="application/json", **headers
    )


def _entries(item_id: object) -> list[AuditEntry]:
    return list(
        AuditEntry.objects.using("admin").filter(subject_id=str(item_id)).order_by("created_at")
    )


@pytest.fixture
def alice(member) -> Person:  # type: ignore[no-untyped-def]
    return member(role="member", staff=False)


def test_a_pending_item_is_cancelled_with_200_and_audited(alice: Person) -> None:
    item, _ = api.enqueue(alice.ctx, "NOOP", {"n": 1})
    response = cancel(alice, item.id)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["outcome"] == "cancelled" and body["item"]["status"] == "cancelled"
    assert body["item"]["cancel_requested_at"] is not None and "claim_token" not in body["item"]
    assert row(item.id).status == Status.CANCELLED
    [entry] = _entries(item.id)
    assert (entry.action, entry.actor, entry.org_id) == (
        "work.cancelled",
        str(alice.user.pk),
        alice.org_id,
    )
    again = cancel(alice, item.id, "{}")
    assert again.status_code == 200 and again.json()["outcome"] == "already_cancelled"
    assert len(_entries(item.id)) == 1


def test_a_running_item_answers_202_and_its_request_is_audited(alice: Person, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(alice.ctx, "NOOP", {"n": 1})
    claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    response = cancel(alice, item.id)
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["outcome"] == "cancel_requested" and body["item"]["status"] == "claimed"
    assert _entries(item.id)[-1].action == "work.cancel_requested"
    assert is_cancel_requested(row(item.id))


def test_a_finished_item_is_409_and_unchanged(alice: Person, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(alice.ctx, "NOOP", {"n": 1})
    [(item_ctx, held)] = claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    complete(item_ctx, held)
    response = cancel(alice, item.id)
    assert response.status_code == 409 and response.json()["field"] == "status"
    assert row(item.id).status == Status.DONE and _entries(item.id) == []


def test_another_tenants_item_and_a_forged_id_are_404(alice: Person, member) -> None:  # type: ignore[no-untyped-def]
    mallory = member(role="owner", staff=False)
    item, _ = api.enqueue(alice.ctx, "NOOP", {"n": 1})
    for target in (item.id, uuid.uuid4(), "not-a-uuid", "x" * 100):
        response = cancel(mallory, target)
        assert response.status_code == 404, (target, response.content)
    assert row(item.id).status == Status.PENDING and _entries(item.id) == []


def test_a_member_cancels_only_their_own_an_admin_any(alice: Person, member) -> None:  # type: ignore[no-untyped-def]
    from tenancy.models import Org

    org = Org.objects.using("admin").get(pk=alice.org_id)
    bob = member(org=org, role="member", staff=False)
    boss = member(org=org, role="admin", staff=False)
    item, _ = api.enqueue(alice.ctx, "NOOP", {"n": 1})
    refused = cancel(bob, item.id)
    assert refused.status_code == 403 and refused.json()["field"] == "role"
    assert row(item.id).status == Status.PENDING
    assert cancel(boss, item.id).status_code == 200
    assert _entries(item.id)[-1].actor == str(boss.user.pk)


def test_refusals_before_anything_changes(alice: Person, committed) -> None:  # type: ignore[no-untyped-def]
    from django.test import Client

    item, _ = api.enqueue(alice.ctx, "NOOP", {"n": 1})
    assert Client().post(f"/api/work/{item.id}/cancel").status_code == 401
    assert alice.client.get(f"/api/work/{item.id}/cancel").status_code == 405
    assert cancel(alice, item.id, '{"why": "no"}').status_code == 400
    query = alice.client.post(f"/api/work/{item.id}/cancel?org=x")
    assert query.status_code == 400 and query.json()["field"] == "org"
    strict = signed_in(alice.user, enforce_csrf_checks=True)
    assert strict.post(f"/api/work/{item.id}/cancel").status_code == 403
    assert row(item.id).status == Status.PENDING and _entries(item.id) == []
