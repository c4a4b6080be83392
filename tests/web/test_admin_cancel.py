"""The admin's cancel action: a confirmation page first, fenced on what it drew, audited with
the operator (or the tenant's staff) as actor, never reaching another tenant's item."""

from __future__ import annotations

import pytest

from audit.models import AuditEntry
from tests.helpers import back_date, row
from tests.web.conftest import Person
from tests.web.test_admin_triage import ITEMS, _messages, ask, confirm
from workqueue import api
from workqueue.cancel import is_cancel_requested
from workqueue.claim import claim
from workqueue.models import Status
from workqueue.settle import complete

pytestmark = pytest.mark.usefixtures("committed")


def _entries(item_id: object) -> list[AuditEntry]:
    return list(
        AuditEntry.objects.using("admin").filter(subject_id=str(item_id)).order_by("created_at")
    )


@pytest.fixture
def staff(member) -> Person:  # type: ignore[no-untyped-def]
    return member()


def test_cancel_asks_first_then_cancels_pending_and_asks_running_holders(
    staff: Person, worker_rctx
) -> None:
    pending, _ = api.enqueue(staff.ctx, "NOOP", {"n": 1})
    running, _ = api.enqueue(staff.ctx, "NOOP", {"n": 2}, lane="other")
    claim(worker_rctx, "other", ["NOOP"], "w1", 30, 10)
    page = ask(staff.client, ITEMS, "cancel", pending, running)
    assert "Cancel: confirm" in page.text and str(pending.id) in page.text
    assert row(pending.id).status == Status.PENDING, "the confirmation page changes nothing"
    done = confirm(staff.client, ITEMS, page)
    assert done.status_code == 302
    assert row(pending.id).status == Status.CANCELLED
    assert is_cancel_requested(row(running.id))
    [cancelled] = _entries(pending.id)
    [requested] = _entries(running.id)
    assert (cancelled.action, requested.action) == ("work.cancelled", "work.cancel_requested")
    assert {cancelled.actor, requested.actor} == {str(staff.user.pk)}
    assert "Cancel: done for 2 item(s)." in _messages(done)


def test_an_item_changed_since_the_page_was_drawn_is_left_alone(staff: Person) -> None:
    item, _ = api.enqueue(staff.ctx, "NOOP", {"n": 1})
    page = ask(staff.client, ITEMS, "cancel", item)
    back_date(item.id, updated_at=3)  # someone changed it meanwhile
    done = confirm(staff.client, ITEMS, page)
    assert row(item.id).status == Status.PENDING and _entries(item.id) == []
    assert any("changed since the page was drawn" in m for m in _messages(done))


def test_a_finished_item_is_not_offered(staff: Person, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(staff.ctx, "NOOP", {"n": 1})
    [(item_ctx, held)] = claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    complete(item_ctx, held)
    response = ask(staff.client, ITEMS, "cancel", item)
    assert response.status_code == 302
    assert any("none of the selected items" in m for m in _messages(response))
    assert row(item.id).status == Status.DONE


def test_the_operator_cancels_across_tenants_as_themselves(operator: Person, member) -> None:  # type: ignore[no-untyped-def]
    a, b = member(), member()
    one, _ = api.enqueue(a.ctx, "NOOP", {"n": 1})
    two, _ = api.enqueue(b.ctx, "NOOP", {"n": 2})
    done = confirm(operator.client, ITEMS, ask(operator.client, ITEMS, "cancel", one, two))
    assert done.status_code == 302
    assert row(one.id).status == row(two.id).status == Status.CANCELLED
    entries = [*_entries(one.id), *_entries(two.id)]
    assert {e.actor for e in entries} == {str(operator.user.pk)}
    assert {e.org_id for e in entries} == {a.org_id, b.org_id}


def test_another_tenants_staff_cannot_cancel_by_a_forged_selection(staff: Person, member) -> None:  # type: ignore[no-untyped-def]
    other = member()
    theirs, _ = api.enqueue(other.ctx, "NOOP", {"n": 1})
    response = ask(staff.client, ITEMS, "cancel", theirs)
    # Their list has no such row: nothing is drawn, nothing changes.
    assert response.status_code in (200, 302)
    assert row(theirs.id).status == Status.PENDING and _entries(theirs.id) == []
