"""The landing page, sign-in, and the demo: a shipment and its notice's work in one
transaction, then the work's status as it moves."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

import pytest
from django.test import Client

from outbox.models import OutboxRow
from outbox.relay import relay_pending
from tests.factories import UserFactory
from tests.web.conftest import Person, signed_in
from workers.demo import views
from workers.demo.models import Shipment
from workqueue.claim import claim
from workqueue.settle import complete

pytestmark = pytest.mark.usefixtures("committed")


def _tags(page: str) -> tuple[Counter[str], Counter[str], str]:
    """The page's opening and closing tags, counted, and its text as a browser shows it."""
    starts: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    text: list[str] = []

    class Reader(HTMLParser):
        def handle_starttag(self, tag: str, attrs: object) -> None:
            starts[tag] += 1

        def handle_endtag(self, tag: str) -> None:
            ends[tag] += 1

        def handle_data(self, data: str) -> None:
            text.append(data)

    Reader().feed(page)
    return starts, ends, " ".join(text)


def test_the_landing_page_says_what_this_is_and_where_to_go() -> None:
    response = Client().get("/")
    assert response.status_code == 200
    for link in (
        'href="/admin/"',
        'href="/admin/workqueue_workers/queuegauges/"',
        'href="/demo/"',
        'href="/metrics"',
    ):
        assert link in response.text
    assert "POST /api/work/" in response.text and "GET /api/work/" in response.text
    assert "/login/" in response.text
    starts, ends, text = _tags(response.text)
    assert starts["li"] == ends["li"] > 0, (starts["li"], ends["li"])
    assert not re.search(r"/[a-z]+>", text), "a broken closing tag shows as text"


def test_members_sign_in_on_the_products_own_page(member) -> None:
    person = member(staff=False)
    person.user.set_password("a long enough password")
    person.user.save(using="system")
    client = Client()
    assert client.get("/login/").status_code == 200
    response = client.post(
        "/login/", {"username": person.user.username, "password": "a long enough password"}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert person.user.username in client.get("/").text


def test_the_demo_needs_a_signed_in_member(member) -> None:
    response = Client().get("/demo/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert signed_in(UserFactory()).get("/demo/").status_code == 403


def _book(person: Person, reference: str = "PARCEL-1", **extra: str):  # type: ignore[no-untyped-def]
    data = {"reference": reference, "recipient_email": "ann@example.com", "channel": "sms"}
    data.update(extra)
    return person.client.post("/demo/", data)


def test_booking_writes_the_shipment_and_its_notice_in_one_transaction(member, worker_rctx) -> None:
    person = member(staff=False, role="member")
    response = _book(person)
    assert response.status_code == 302
    work_id = re.fullmatch(r"/demo/work/([0-9a-f-]{36})/", response["Location"]).group(1)
    shipment = Shipment.objects.using("admin").get()
    assert (shipment.org_id, shipment.reference) == (person.org_id, "PARCEL-1")
    row = OutboxRow.objects.using("admin").get()
    assert str(row.id) == work_id and row.kind == "work.NOTIFY_SHIPMENT"
    assert row.payload == {"shipment_id": str(shipment.id), "version": 1, "channel": "sms"}
    assert row.actor == str(person.user.pk)
    page = person.client.get(response["Location"]).text
    assert 'id="outbox-status">pending' in page and "not enqueued yet" in page
    # The relay makes the work item, with the row's id; the page follows it.
    assert relay_pending(worker_rctx).enqueued == 1
    page = person.client.get(response["Location"]).text
    assert 'id="work-status">pending' in page and 'id="outbox-status">relayed' in page
    [(ctx, item)] = claim(worker_rctx, "default", ["NOTIFY_SHIPMENT"], "w1", 30, 10)
    assert str(item.id) == work_id and item.created_by == str(person.user.pk)
    assert 'id="work-status">claimed' in person.client.get(response["Location"]).text
    complete(ctx, item)
    done = person.client.get(response["Location"]).text
    assert 'id="work-status">done' in done and 'data-final="1"' in done
    # The list shows the shipment.
    assert "PARCEL-1" in person.client.get("/demo/").text


def test_a_failed_view_leaves_neither_the_shipment_nor_its_work(member, monkeypatch) -> None:
    person = member()

    def fail(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("the outbox is away")

    monkeypatch.setattr(views, "emit", fail)
    with pytest.raises(RuntimeError):
        _book(person)
    assert Shipment.objects.using("admin").count() == 0
    assert OutboxRow.objects.using("admin").count() == 0


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"recipient_email": "not an address"}, "Enter a valid email address"),
        ({"reference": ""}, "This field is required"),
        ({"reference": "x" * 101}, "at most 100 characters"),
        ({"reference": "a\x00b"}, "Null characters are not allowed"),
        ({"channel": "pigeon"}, "Select a valid choice"),
    ],
)
def test_bad_input_shows_the_field_and_stores_nothing(member, fields, says: str) -> None:
    response = _book(member(), **fields)
    assert response.status_code == 200 and says in response.text
    assert Shipment.objects.using("admin").count() == 0
    assert OutboxRow.objects.using("admin").count() == 0


def test_a_taken_reference_is_a_form_error_and_stores_nothing_more(member) -> None:
    person = member()
    assert _book(person).status_code == 302
    again = _book(person)
    assert again.status_code == 200
    assert "A shipment with this reference exists in your org" in again.text
    assert Shipment.objects.using("admin").count() == 1
    assert OutboxRow.objects.using("admin").count() == 1
    # Another tenant may use the same reference.
    assert _book(member()).status_code == 302


def test_another_tenants_work_is_not_found(member) -> None:
    mine = _book(member())["Location"]
    stranger = member()
    assert stranger.client.get(mine).status_code == 404
    assert stranger.client.get("/demo/work/not-a-uuid/").status_code == 404
