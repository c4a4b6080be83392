"""Triage in the admin: every action behind a confirmation page, fenced on what that page drew,
audited with the operator as actor, bounded, and never reaching another tenant's item."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client

from audit.models import AuditEntry
from tests.helpers import dead_letter, row
from tests.web.conftest import Person, signed_in
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Status
from workqueue.triage import Drawn, requeue_dead

pytestmark = pytest.mark.usefixtures("committed")

DEAD = "/admin/workqueue/deadletter/"
ITEMS = "/admin/workqueue/workitem/"


def ask(client: Client, url: str, action: str, *items, **extra):  # type: ignore[no-untyped-def]
    """Choose ``action`` for ``items`` on a list page: the confirmation page (or a redirect)."""
    data = {"action": action, "_selected_action": [str(i.id) for i in items], **extra}
    return client.post(url, data)


def confirm(client: Client, url: str, page, **extra):  # type: ignore[no-untyped-def]
    """Submit a confirmation page as drawn (its hidden fields), with ``extra`` fields."""
    assert page.status_code == 200, page.status_code
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text)
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(html.unescape(value))
    data.pop("csrfmiddlewaretoken", None)
    for name, value in extra.items():
        data[name] = [value]
    return client.post(url, data)


def _messages(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(m) for m in response.wsgi_request._messages]


def _audit(item) -> list[AuditEntry]:  # type: ignore[no-untyped-def]
    return list(
        AuditEntry.objects.using("admin")
        .filter(subject_id=str(item.id))
        .exclude(action="work.dead_lettered")
        .order_by("created_at")
    )


def _db_now():  # type: ignore[no-untyped-def]
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


@pytest.fixture
def staff(member) -> Person:  # type: ignore[no-untyped-def]
    return member()


def test_requeue_now_asks_first_then_requeues_and_audits_the_operator(
    staff: Person, worker_rctx
) -> None:
    dead = dead_letter(staff.ctx, worker_rctx, error="the gateway said no")
    page = ask(staff.client, DEAD, "requeue_now", dead)
    assert "Requeue now: confirm" in page.text and str(dead.id) in page.text
    assert row(dead.id).status == Status.FAILED, "the confirmation page changes nothing"
    done = confirm(staff.client, DEAD, page)
    assert done.status_code == 302
    now = row(dead.id)
    assert (now.status, now.attempts, now.last_error) == (Status.PENDING, 0, "")
    [entry] = _audit(dead)
    assert (entry.action, entry.actor, entry.org_id) == (
        "work.requeued",
        str(staff.user.pk),
        staff.org_id,
    )
    assert entry.data["error"] == "the gateway said no"
    follow = staff.client.get(done["Location"])
    assert "Requeue now: done for 1 item(s)." in follow.text


def test_requeue_later_takes_a_checked_delay(staff: Person, worker_rctx) -> None:
    dead = dead_letter(staff.ctx, worker_rctx)
    page = ask(staff.client, DEAD, "requeue_later", dead)
    assert 'name="delay_minutes"' in page.text
    for bad in ("0", "-5", "abc", "43201", "1e3", "", "²", "٣", "9" * 5000, " 5 5"):
        again = confirm(staff.client, DEAD, page, delay_minutes=bad)
        assert again.status_code == 200
        assert "delay_minutes: must be a whole number of minutes" in again.text
        assert "nothing was changed" in again.text
    assert row(dead.id).status == Status.FAILED and _audit(dead) == []
    before = _db_now()
    confirm(staff.client, DEAD, page, delay_minutes="30")
    delay = row(dead.id).available_at - before
    assert timedelta(minutes=29) < delay < timedelta(minutes=31)
    assert _audit(dead)[0].data["delay_s"] == 1800


def test_discard_keeps_payload_and_error_in_the_audit_trail(staff: Person, worker_rctx) -> None:
    dead = dead_letter(staff.ctx, worker_rctx, payload={"n": 42}, error="poison")
    confirm(staff.client, DEAD, ask(staff.client, DEAD, "discard", dead))
    assert row(dead.id).status == Status.DISCARDED
    [entry] = _audit(dead)
    assert entry.action == "work.discarded"
    assert (entry.data["payload"], entry.data["error"]) == ({"n": 42}, "poison")
    failed = api.WorkItem.objects.using("admin").filter(status="failed")
    assert dead.id not in set(failed.values_list("id", flat=True))


def test_edit_payload_is_validated_and_a_bad_edit_changes_nothing(
    staff: Person, worker_rctx
) -> None:
    dead = dead_letter(staff.ctx, worker_rctx, payload={"n": 1})
    page = ask(staff.client, DEAD, "edit_payload", dead)
    assert "&quot;n&quot;: 1" in page.text  # the current payload, to edit
    for bad, says in (
        ('{"n": ', "payload: not valid JSON"),
        ('{"n": NaN}', "payload: not valid JSON"),
        ('{"n": "three"}', "payload.n: Input should be a valid integer"),
        ('{"typo": 1}', "payload.typo: Extra inputs are not permitted"),
        ("[1, 2]", "payload: must be a JSON object"),
        ('{"n": 1, "sleep_s": -1}', "payload.sleep_s"),
    ):
        again = confirm(staff.client, DEAD, page, payload=bad)
        assert again.status_code == 200
        assert says in html.unescape(again.text), bad
        assert html.escape(bad) in again.text  # the edit is kept to correct
    assert row(dead.id).payload == {"n": 1} and _audit(dead) == []
    confirm(staff.client, DEAD, page, payload='{"n": 2}')
    now = row(dead.id)
    assert (now.status, now.payload, now.attempts) == (Status.PENDING, {"n": 2}, 0)
    [entry] = _audit(dead)
    assert entry.action == "work.requeued_edited"
    assert (entry.data["payload_before"], entry.data["payload"]) == ({"n": 1}, {"n": 2})


def test_edit_payload_takes_one_item_at_a_time(staff: Person, worker_rctx) -> None:
    first, second = (dead_letter(staff.ctx, worker_rctx) for _ in range(2))
    response = ask(staff.client, DEAD, "edit_payload", first, second)
    assert response.status_code == 302
    assert any("edit one item at a time" in m for m in _messages(response))


def test_an_item_changed_after_the_page_was_drawn_is_not_overwritten(
    staff: Person, worker_rctx
) -> None:
    dead = dead_letter(staff.ctx, worker_rctx)
    page = ask(staff.client, DEAD, "discard", dead)
    # Meanwhile, someone else requeues it and a worker claims it.
    requeue_dead(staff.ctx, [Drawn.of(dead)])
    claim(worker_rctx, dead.lane, ["NOOP"], "w2", 30, 10)
    done = confirm(staff.client, DEAD, page)
    assert any(
        "changed since the page was drawn and were left as they are" in m for m in _messages(done)
    )
    assert row(dead.id).status == Status.CLAIMED
    assert [e.action for e in _audit(dead)] == ["work.requeued"]


def test_a_failed_again_item_is_caught_by_its_updated_at(staff: Person, worker_rctx) -> None:
    """Still failed, but not the failure the operator saw: the fence is status and time."""
    dead = dead_letter(staff.ctx, worker_rctx)
    page = ask(staff.client, DEAD, "requeue_now", dead)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_workitem SET updated_at = now(), last_error = 'again' WHERE id = %s",
            [dead.id],
        )
    done = confirm(staff.client, DEAD, page)
    assert any("changed since the page was drawn" in m for m in _messages(done))
    assert row(dead.id).status == Status.FAILED and _audit(dead) == []


def test_bulk_actions_are_bounded(staff: Person, worker_rctx, monkeypatch) -> None:
    monkeypatch.setattr("workqueue.admin.confirmation.MAX_BATCH", 2)
    items = [dead_letter(staff.ctx, worker_rctx) for _ in range(3)]
    # A selection of the items list is bounded (the dead-letter list's "select all" is the
    # triage by filter instead: tests/web/test_admin_triage_by_filter.py).
    response = staff.client.post(
        ITEMS, {"action": "requeue_now", "select_across": "1", "_selected_action": [items[0].id]}
    )
    assert response.status_code == 302
    assert any("Select at most 2 items at a time" in m for m in _messages(response))
    assert {row(i.id).status for i in items} == {Status.FAILED}
    handed = staff.client.post(
        DEAD, {"action": "requeue_now", "select_across": "1", "_selected_action": [items[0].id]}
    )
    assert "/admin/workqueue/deadletter/matching/requeue/" in handed["Location"]
    assert {row(i.id).status for i in items} == {Status.FAILED}
    # Two at once are fine.
    page = ask(staff.client, DEAD, "requeue_now", items[0], items[1])
    confirm(staff.client, DEAD, page)
    assert [row(i.id).status for i in items] == [Status.PENDING, Status.PENDING, Status.FAILED]


def test_an_action_on_items_it_does_not_apply_to_changes_nothing(
    staff: Person, worker_rctx
) -> None:
    pending, _ = api.enqueue(staff.ctx, "NOOP", {})
    response = ask(staff.client, ITEMS, "requeue_now", pending)
    assert response.status_code == 302
    assert any("none of the selected items is failed" in m for m in _messages(response))
    dead = dead_letter(staff.ctx, worker_rctx)
    page = ask(staff.client, ITEMS, "requeue_now", pending, dead)
    assert "Left out (1)" in page.text
    confirm(staff.client, ITEMS, page)
    assert (row(pending.id).status, row(dead.id).status) == (Status.PENDING, Status.PENDING)


def test_tenant_staff_cannot_act_on_another_tenants_item(member, worker_rctx) -> None:
    a, b = member(), member()
    theirs = dead_letter(b.ctx, worker_rctx)
    forged = {
        "action": "requeue_now",
        "_selected_action": [str(theirs.id)],
        "fence": [Drawn.of(theirs).token()],
        "confirm": "yes",
    }
    for url in (DEAD, ITEMS):
        response = a.client.post(url, forged)
        assert response.status_code in (200, 302)
    assert row(theirs.id).status == Status.FAILED and _audit(theirs) == []
    # Nor with its own item selected beside the other tenant's fence.
    mine = dead_letter(a.ctx, worker_rctx)
    forged["_selected_action"] = [str(mine.id), str(theirs.id)]
    forged["fence"] = [Drawn.of(mine).token(), Drawn.of(theirs).token()]
    a.client.post(DEAD, forged)
    assert row(mine.id).status == Status.PENDING
    assert row(theirs.id).status == Status.FAILED and _audit(theirs) == []


def test_the_operator_acts_across_tenants_and_each_entry_names_them(
    operator: Person, member, worker_rctx
) -> None:
    a, b = member(), member()
    first, second = dead_letter(a.ctx, worker_rctx), dead_letter(b.ctx, worker_rctx)
    page = ask(operator.client, DEAD, "requeue_now", first, second)
    assert a.org_id is not None
    confirm(operator.client, DEAD, page)
    assert {row(first.id).status, row(second.id).status} == {Status.PENDING}
    for item, org_id in ((first, a.org_id), (second, b.org_id)):
        [entry] = _audit(item)
        assert (entry.actor, entry.org_id) == (str(operator.user.pk), org_id)


def test_the_detail_pages_buttons_open_the_confirmation(staff: Person, worker_rctx) -> None:
    dead = dead_letter(staff.ctx, worker_rctx)
    detail = staff.client.get(f"{DEAD}{dead.id}/change/").text
    assert f'action="{DEAD}"' in detail
    page = staff.client.post(DEAD, {"action": "discard", "_selected_action": str(dead.id)})
    assert "Discard: confirm" in page.text
    confirm(staff.client, DEAD, page)
    assert row(dead.id).status == Status.DISCARDED


@pytest.mark.parametrize(
    "fence",
    ["", "garbage", "x|failed|2026-01-01T00:00:00+00:00", "|".join(["a"] * 50)],
)
def test_a_tampered_fence_changes_nothing(staff: Person, worker_rctx, fence: str) -> None:
    dead = dead_letter(staff.ctx, worker_rctx)
    page = ask(staff.client, DEAD, "requeue_now", dead)
    response = confirm(staff.client, DEAD, page, fence=fence)
    assert response.status_code == 200 and "fence" in response.text
    assert row(dead.id).status == Status.FAILED and _audit(dead) == []


def test_triage_posts_need_the_csrf_token(staff: Person, worker_rctx) -> None:
    dead = dead_letter(staff.ctx, worker_rctx)
    client = signed_in(staff.user, enforce_csrf_checks=True)
    response = client.post(
        DEAD,
        {
            "action": "requeue_now",
            "_selected_action": str(dead.id),
            "fence": Drawn.of(dead).token(),
            "confirm": "yes",
        },
    )
    assert response.status_code == 403
    assert row(dead.id).status == Status.FAILED


def test_a_tampered_fence_for_an_item_that_left_the_list_changes_nothing(
    staff: Person, worker_rctx
) -> None:
    pending, _ = api.enqueue(staff.ctx, "NOOP", {})
    response = staff.client.post(
        DEAD,
        {
            "action": "requeue_now",
            "_selected_action": str(pending.id),
            "fence": "garbage",
            "confirm": "yes",
        },
    )
    assert response.status_code == 302
    assert any("fence: must be" in m for m in _messages(response))
    assert row(pending.id).status == Status.PENDING


def test_an_operator_who_is_a_member_of_one_tenant_acts_in_another(member, worker_rctx) -> None:
    """The view runs in the operator's own tenant's scope; the action runs under the item's."""
    a, b = member(), member()
    a.user.is_superuser = True
    a.user.save(using="admin")
    theirs = dead_letter(b.ctx, worker_rctx)
    confirm(a.client, DEAD, ask(a.client, DEAD, "requeue_now", theirs))
    assert row(theirs.id).status == Status.PENDING
    [entry] = _audit(theirs)
    assert (entry.actor, entry.org_id) == (str(a.user.pk), b.org_id)
