"""Attack rows on the demo page (``/demo/``: book a shipment and its notice's work; the work's
page), by A's member.

Each row is refused or ignored: a booking needs its CSRF token; a tenant named through the
header is refused, through the form or the query string ignored (the shipment is A's); B's
shipments, and B's work, are never shown, nor told apart from ones that do not exist; and a
notice's work of A's naming B's shipment sends nothing about it.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpResponse
from django.test import Client

from tenancy.contexts import AppType, new_request_context
from tests.security.table import Scene, attack, client_of
from tests.security.world import SECRET, World
from workers.demo.handler import NotifyShipmentHandler
from workers.demo.models import Shipment, ShipmentNotice
from workqueue import api
from workqueue.api import PermanentError, Run
from workqueue.claim import claim
from workqueue.settle import fail

DEMO = "/demo/"
BOOKING = {"reference": "A-PARCEL", "recipient_email": "ann@example.com", "channel": "email"}


def shipments_of(org_id: uuid.UUID) -> list[Shipment]:
    return list(Shipment.objects.using("admin").filter(org_id=org_id).order_by("created_at"))


def nothing_of_b(world: World, response: HttpResponse) -> None:
    page = response.content.decode(errors="replace")
    b = world.b
    for value in (b.shipment, b.shipment_work, b.org_id, b.user_id, SECRET):
        assert str(value) not in page, f"{value} is on the page"


def books_in_a(world: World, send: Any) -> None:
    """``send()`` books one shipment, A's, and nothing of B's shows in the answer."""
    before = len(shipments_of(world.a.org_id))
    response = send()
    assert response.status_code == 302, (response.status_code, response.content[:300])
    assert len(shipments_of(world.a.org_id)) == before + 1
    nothing_of_b(world, response)


@attack("demo", "book without the CSRF token")
def _csrf(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    client.handler.enforce_csrf_checks = True
    before = len(shipments_of(w.a.org_id))
    assert client.post(DEMO, BOOKING).status_code == 403
    assert client.post(DEMO, BOOKING, HTTP_X_CSRFTOKEN="x" * 32).status_code == 403
    assert len(shipments_of(w.a.org_id)) == before


@attack("demo", "book into B naming it with X-Org-ID")
def _header(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    before = len(shipments_of(w.a.org_id))
    for value in (str(w.b.org_id), f"{w.b.org_id}' OR '1'='1"):
        response = client.post(DEMO, BOOKING, HTTP_X_ORG_ID=value)
        assert response.status_code == 403, response.status_code
        nothing_of_b(w, response)
    assert len(shipments_of(w.a.org_id)) == before


@attack("demo", "book into B naming it in the form")
def _form(scene: Scene) -> None:
    w = scene.world
    b = str(w.b.org_id)
    data = {**BOOKING, "org": b, "org_id": b, "X-Org-ID": b, "created_by": str(w.b.user_id)}
    books_in_a(w, lambda: client_of(w).post(DEMO, data))


@attack("demo", "book into B naming it in the query string")
def _query(scene: Scene) -> None:
    w = scene.world
    books_in_a(
        w, lambda: client_of(w).post(f"{DEMO}?org_id={w.b.org_id}&org={w.b.org_id}", BOOKING)
    )


@attack("demo", "book with B's reference: no sign that B has it")
def _their_reference(scene: Scene) -> None:
    w = scene.world
    # A reference is unique in its org: "exists" here would tell A about B's shipment.
    data = {**BOOKING, "reference": f"{SECRET}-parcel"}
    client = client_of(w)
    response = client.post(DEMO, data)
    assert response.status_code == 302, response.content[:300]
    assert [s.reference for s in shipments_of(w.a.org_id)][-1] == f"{SECRET}-parcel"


@attack("demo", "SQL in the booking's fields is stored as text")
def _injection(scene: Scene) -> None:
    w = scene.world
    reference = "x'); UPDATE workqueue_demo_shipment SET reference = 'pwned'; --"
    books_in_a(w, lambda: client_of(w).post(DEMO, {**BOOKING, "reference": reference}))
    assert shipments_of(w.a.org_id)[-1].reference == reference


@attack("demo", "B's shipments on A's booking page")
def _list(scene: Scene) -> None:
    w = scene.world
    for headers in ({}, {"HTTP_X_ORG_ID": str(w.a.org_id)}):
        response = client_of(w).get(f"{DEMO}?org_id={w.b.org_id}", **headers)
        assert response.status_code == 200 and "a-parcel" in response.content.decode()
        nothing_of_b(w, response)


@attack("demo", "open B's work page: 404, as for work that never was")
def _work_page(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    never = client.get(f"{DEMO}work/{uuid.uuid4()}/")
    for work_id in (w.b.shipment_work, w.b.parked.id, w.b.held.id, w.b.outbox_id):
        response = client.get(f"{DEMO}work/{work_id}/")
        assert response.status_code == never.status_code == 404
        nothing_of_b(w, response)
    response = client.get(f"{DEMO}work/{w.b.shipment_work}/", HTTP_X_ORG_ID=str(w.b.org_id))
    assert response.status_code == 403


@attack("demo", "SQL and JSON in the work page's id")
def _work_injection(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for crafted in ("' OR '1'='1", f"{w.b.shipment_work}' OR '1'='1", '{"$ne":null}', "%00"):
        assert client.get(f"{DEMO}work/{crafted}/").status_code == 404


@attack("demo", "anonymous booking, and B's work page")
def _anonymous(scene: Scene) -> None:
    w = scene.world
    client = Client()
    before = len(shipments_of(w.a.org_id))
    for response in (client.post(DEMO, BOOKING), client.get(f"{DEMO}work/{w.b.shipment_work}/")):
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert len(shipments_of(w.a.org_id)) == before


@attack("demo", "A's notice work naming B's shipment: its page and its run")
def _notice_of_b(scene: Scene) -> None:
    w = scene.world
    lane = f"sec-notice-{uuid.uuid4().hex[:8]}"
    payload = {"shipment_id": str(w.b.shipment), "version": 1, "channel": "sms"}
    item, _ = api.enqueue(w.a.ctx, "NOTIFY_SHIPMENT", payload, lane=lane)
    response = client_of(w).get(f"{DEMO}work/{item.id}/")
    assert response.status_code == 200
    nothing_of_b(w, response)
    [(ctx, held)] = claim(
        new_request_context(AppType.WORKER), lane, ["NOTIFY_SHIPMENT"], "w", 30, 1
    )
    try:
        NotifyShipmentHandler().handle(ctx, held, Run())
    except PermanentError as exc:
        assert "not found" in str(exc)
    else:
        raise AssertionError("A's notice ran against B's shipment")
    fail(ctx, held, "refused", permanent=True)
    assert not ShipmentNotice.objects.using("admin").filter(shipment_id=w.b.shipment).exists()
