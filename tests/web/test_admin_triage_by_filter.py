"""The dead letters of a bad deploy in the admin: grouped by kind and error, filtered by when
they failed, searched by error text, and requeued or discarded by one filter action (server-side,
fenced on the moment confirmed, audited with the operator by name)."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connections

from audit.models import AuditEntry
from tests.helpers import many_dead, row
from tests.web.conftest import Person
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

DEAD = "/admin/workqueue/deadletter/"
GROUPS = DEAD + "groups/"
BAD_DEPLOY = "PermanentError: shipment not found"


def _form(page) -> tuple[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    """The confirmation page's form: where it posts and its hidden fields."""
    assert page.status_code == 200, page.status_code
    action = html.unescape(re.search(r'<form method="post" action="([^"]*)"', page.text).group(1))
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
    fields.pop("csrfmiddlewaretoken", None)
    return action, {k: html.unescape(v) for k, v in fields.items()}


def _statuses(ids) -> dict[str, int]:  # type: ignore[no-untyped-def]
    counts: dict[str, int] = {}
    for status in (
        WorkItem.objects.using("admin").filter(pk__in=ids).values_list("status", flat=True)
    ):
        counts[status] = counts.get(status, 0) + 1
    return counts


def _messages(response) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(m) for m in response.wsgi_request._messages]


@pytest.fixture
def staff(member) -> Person:  # type: ignore[no-untyped-def]
    return member()


def test_five_thousand_dead_letters_group_into_one_row_and_requeue_in_one_action(
    operator: Person, staff: Person
) -> None:
    ids = many_dead(staff.org_id, 5000, error=BAD_DEPLOY)
    others = many_dead(staff.org_id, 2, kind="NOTIFY_SHIPMENT", error="RetryableError: timeout")
    page = operator.client.get(GROUPS)
    assert page.status_code == 200
    rows = re.findall(r'<tr class="group">(.*?)</tr>', page.text, re.S)
    assert len(rows) == 2
    assert ">5000</a>" in rows[0] and BAD_DEPLOY in rows[0] and "NOOP" in rows[0]
    assert ">2</a>" in rows[1]
    # One click from the group to its items: the list filtered by kind and error.
    link = html.unescape(re.search(r'href="([^"]+)" class="group-items"', rows[0]).group(1))
    listed = operator.client.get(link)
    assert "more than" not in listed.text and "5000 dead letters" in listed.text
    # ... and one filter action for all of them.
    requeue = html.unescape(re.search(r'href="([^"]+)" class="group-requeue"', rows[0]).group(1))
    confirm = operator.client.get(requeue)
    assert re.search(r"Requeue: <strong>5000</strong> dead letters", confirm.text)
    assert _statuses(ids) == {"failed": 5000}, "the confirmation page changes nothing"
    # Meanwhile, after the page was drawn: one item fails again (a later updated_at).
    with connections["admin"].cursor() as cursor:
        cursor.execute("UPDATE workqueue_workitem SET updated_at = now() WHERE id = %s", [ids[7]])
    action, fields = _form(confirm)
    done = operator.client.post(requeue.split("?")[0] + action, fields)
    assert done.status_code == 302, done.content[:500]
    said = _messages(done)
    assert "Requeue by filter: done for 4999 item(s)." in said
    assert "1 item(s) changed since you confirmed and were left as they are." in said
    assert _statuses(ids) == {"pending": 4999, "failed": 1}
    assert row(ids[7]).status == Status.FAILED
    assert _statuses(others) == {"failed": 2}
    entries = AuditEntry.objects.using("admin").filter(action="work.requeued")
    assert entries.count() == 4999
    assert set(entries.values_list("actor", flat=True)) == {str(operator.user.pk)}
    # The item's page names the operator, not their key.
    item = operator.client.get(f"/admin/workqueue/workitem/{ids[0]}/change/")
    history = item.text.split('id="history"')[1]
    assert operator.user.get_username() in history


def test_discard_by_filter_and_select_all_hands_over_to_it(operator: Person, staff: Person) -> None:
    ids = many_dead(staff.org_id, 150, error=BAD_DEPLOY)
    # "Select all" on the list with Discard: the triage by filter of what the list shows.
    handed = operator.client.post(
        DEAD + "?kind=NOOP",
        {"action": "discard", "select_across": "1", "_selected_action": [str(ids[0])]},
    )
    assert handed.status_code == 302 and "/matching/discard/?kind=NOOP" in handed["Location"]
    confirm = operator.client.get(handed["Location"])
    action, fields = _form(confirm)
    done = operator.client.post(handed["Location"].split("?")[0] + action, fields)
    assert "Discard by filter: done for 150 item(s)." in _messages(done)
    assert _statuses(ids) == {"discarded": 150}
    assert AuditEntry.objects.using("admin").filter(action="work.discarded").count() == 150


def test_a_run_past_its_budget_resumes_from_its_page(operator: Person, staff: Person) -> None:
    from tests.helpers import queue_settings

    ids = many_dead(staff.org_id, 120, error=BAD_DEPLOY)
    with queue_settings(TRIAGE_BATCH=25, TRIAGE_MAX_BATCHES=2):
        url = DEAD + "matching/requeue/"
        action, fields = _form(operator.client.get(url))
        first = operator.client.post(url + action, fields)
        assert first.status_code == 200 and "Done so far: 50 items" in first.text
        action, fields = _form(first)
        assert fields["done_so_far"] == "50"
        second = operator.client.post(url + action, fields)
        action, fields = _form(second)
        third = operator.client.post(url + action, fields)
    assert third.status_code == 302
    assert "Requeue by filter: done for 120 item(s)." in _messages(third)
    assert _statuses(ids) == {"pending": 120}


def test_failed_filter_and_error_search_on_the_list(staff: Person) -> None:
    many_dead(staff.org_id, 3, error="ValueError: bad_input 100%", failed_s_ago=30)
    many_dead(staff.org_id, 4, error="ValueError: bad_input 100%", failed_s_ago=3 * 3600)
    many_dead(staff.org_id, 5, error="KeyError: 'sku'", failed_s_ago=30, lane="imports")
    client = staff.client

    def count(query: str) -> int:
        page = client.get(DEAD + query)
        assert page.status_code == 200, (query, page.status_code)
        return page.text.count('class="action-select"')

    assert count("") == 12
    assert count("?failed=hour") == 8
    assert count("?failed=day") == 12
    assert count("?q=bad_input") == 7
    assert count("?q=BAD_INPUT+100%25&failed=hour") == 3
    assert count("?q=bad%25input") == 0  # the wildcard is taken literally
    assert count("?lane=imports") == 5
    # The lane filter lists every lane with dead letters, declared or not.
    assert "?lane=imports" in client.get(DEAD).text
    since = client.get(DEAD + "?failed_since=2000-01-01T00:00:00%2B00:00")
    assert since.text.count('class="action-select"') == 12 and "since 2000-01-01" in since.text
    bad = client.get(DEAD + "?failed_since=yesterday")
    assert bad.status_code == 302 and "e=1" in bad["Location"]
    # The grouped view reads the same filter.
    grouped = client.get(GROUPS + "?failed=hour")
    assert grouped.text.count('<tr class="group">') == 2


def test_a_trace_id_links_through_the_url_template(staff: Person, worker_rctx) -> None:
    from tests.helpers import dead_letter, queue_settings

    dead = dead_letter(staff.ctx, worker_rctx)
    trace = "0af7651916cd43dd8448eb211c80319c"
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_workitem SET traceparent = %s WHERE id = %s",
            [f"00-{trace}-b7ad6b7169203331-01", dead.id],
        )
    url = f"{DEAD}{dead.id}/change/"
    plain = staff.client.get(url)
    assert trace in plain.text and 'id="trace-link"' not in plain.text
    with queue_settings(TRACE_URL_TEMPLATE="https://tempo.example/trace/{trace_id}"):
        linked = staff.client.get(url)
    assert f'<a href="https://tempo.example/trace/{trace}" id="trace-link"' in linked.text
    # The author is shown by name.
    assert staff.user.get_username() in linked.text.split("Created by")[1][:400]


def test_the_audit_trail_names_its_actors(operator: Person, staff: Person) -> None:
    from audit.services import append

    append(staff.ctx, "work.requeued", ("workqueue.workitem", "x1"), {"n": 1})
    listing = operator.client.get("/admin/workqueue_audit/auditentry/").text
    rows = re.search(r'<table id="result_list">.*?</table>', listing, re.S).group(0)
    assert staff.user.get_username() in rows
    assert f">{staff.user.pk}<" not in rows


def test_a_filter_action_never_matches_more_than_the_list_shows(operator: Person, staff) -> None:  # type: ignore[no-untyped-def]
    ids = many_dead(staff.org_id, 5)
    for query, says in (
        (f"?q={ids[0]}", "q: an item's id"),
        ("?payload__n=1", "payload__n: not a filter of the dead letters"),
        ("?failed=fortnight", "failed: must be one of hour, day, week"),
    ):
        response = operator.client.post(
            DEAD + "matching/requeue/" + query,
            {"confirm": "yes", "until": "2999-01-01T00:00:00+00:00"},
        )
        assert response.status_code == 302, query
        assert any(says in m for m in _messages(response)), (query, _messages(response))
    assert _statuses(ids) == {"failed": 5}
