"""Attack rows on the JSON API (``POST /api/work/``, ``GET /api/work/<id>``), by A's member.

Each row is refused: another tenant's item is a 404 exactly like an id that never existed; a
tenant named through the header, the body or the query string is refused; the author and the
tenant never come from the body; a stored ``Idempotency-Key`` answer is its own user's in its
own tenant; CSRF, sign-in, method and content type are checked; and a refusal stores nothing,
in A either.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db import connections
from django.http import HttpResponse
from django.test import Client

from tests.helpers import row
from tests.security.table import Scene, attack, client_of
from tests.security.world import API_BODY, API_PATH, PARKED, SECRET, World
from workqueue.models import StoredResponse

NOOP = {"kind": "NOOP", "payload": {"n": 1}, "lane": PARKED}


def post(
    client: Client, body: Any, *, key: str | None = None, path: str = API_PATH, **headers: Any
) -> HttpResponse:
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(path, data, content_type="application/json", **headers)


def a_rows(world: World) -> tuple[int, ...]:
    """A's items, outbox rows, audit entries and stored answers, counted as the owner."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM workqueue_workitem WHERE org_id = %(a)s),"
            " (SELECT count(*) FROM workqueue_outbox_outboxrow WHERE org_id = %(a)s),"
            " (SELECT count(*) FROM workqueue_audit_auditentry WHERE org_id = %(a)s),"
            " (SELECT count(*) FROM workqueue_storedresponse WHERE org_id = %(a)s)",
            {"a": world.a.org_id},
        )
        return tuple(cursor.fetchone())


def refused(
    world: World,
    response: HttpResponse,
    status: int | tuple[int, ...],
    field: str | None = None,
    echoed: str = "",
) -> dict[str, Any]:
    """The answer is a JSON refusal with ``status`` (naming ``field``), carrying nothing of
    B's but ``echoed`` (what A sent, repeated in the reason); returns its body."""
    statuses = (status,) if isinstance(status, int) else status
    assert response.status_code in statuses, (response.status_code, response.content[:300])
    body = response.json()
    assert "error" in body and "item" not in body, body
    if field is not None:
        assert body.get("field") == field, body
    nothing_of_b(world, response.content.decode(), sent=echoed)
    return body


def same_as_for_none(
    world: World, send: Any, value: str, status: int, field: str | None = None
) -> None:
    """``send(value)`` (naming something of B's) is refused exactly as ``send`` naming a
    random id is, but for the id: no sign that B's exists."""
    never = str(uuid.uuid4())
    answers = []
    for sent in (value, never):
        response = stores_nothing(world, lambda s=sent: send(s))
        refused(world, response, status, field, echoed=sent)
        answers.append(response.content.decode().replace(sent, "<sent>"))
    assert answers[0] == answers[1], answers


def nothing_of_b(world: World, text: str, sent: str = "") -> None:
    """Nothing of B's in ``text``, but what A ``sent`` itself (a reason may repeat it)."""
    b = world.b
    for value in (b.org_id, b.user_id, b.parked.id, b.held.id, b.dead.id, b.answer_item, b.key):
        if str(value) not in sent:
            assert str(value) not in text, f"{value} is in the answer"
    assert SECRET not in text


def stores_nothing(world: World, send: Any) -> HttpResponse:
    """``send()``'s response, after checking it left no row in A either."""
    before = a_rows(world)
    response = send()
    assert a_rows(world) == before, f"a refused request left rows: {before} -> {a_rows(world)}"
    return response


# -- another tenant's item ----------------------------------------------------------------------


@attack("api", "read B's item by its id: 404, the same answer as an id that never was")
def _read_b(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    theirs = client.get(f"{API_PATH}{w.b.parked.id}")
    never = client.get(f"{API_PATH}{uuid.uuid4()}")
    refused(w, theirs, 404)
    assert (theirs.status_code, theirs.content) == (never.status_code, never.content)


@attack("api", "read B's secret item, and B's stored answer's item, by id")
def _read_b_secret(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for item_id in (w.b.held.id, w.b.answer_item, w.b.dead.id, w.b.shipment_work):
        refused(w, client.get(f"{API_PATH}{item_id}/"), 404)


@attack("api", "read B's item naming B with X-Org-ID")
def _read_b_header(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    url = f"{API_PATH}{w.b.parked.id}"
    same_as_for_none(
        w, lambda org: client.get(url, HTTP_X_ORG_ID=org), str(w.b.org_id), 403, "X-Org-ID"
    )


@attack("api", "read B's item naming B in the query string")
def _read_b_query(scene: Scene) -> None:
    w = scene.world
    response = client_of(w).get(
        f"{API_PATH}{w.b.parked.id}?org_id={w.b.org_id}&X-Org-ID={w.b.org_id}"
    )
    refused(w, response, (400, 403, 404))


@attack("api", "delete, replace or patch B's item")
def _write_b(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    url = f"{API_PATH}{w.b.parked.id}"
    body = json.dumps({"status": "done"})
    for method in (client.delete, client.put, client.patch):
        refused(w, method(url, body, content_type="application/json"), 405)
    refused(w, post(client, NOOP, path=url), 405)


def cancel(client: Client, item_id: Any, **headers: Any) -> HttpResponse:
    return client.post(
        f"{API_PATH}{item_id}/cancel", "", content_type="application/json", **headers
    )


@attack("api", "cancel B's items by their ids: 404, the same answer as an id that never was")
def _cancel_b(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    never = cancel(client, uuid.uuid4())
    for item_id in (w.b.parked.id, w.b.held.id, w.b.dead.id, w.b.answer_item):
        theirs = stores_nothing(w, lambda i=item_id: cancel(client, i))
        refused(w, theirs, 404)
        assert (theirs.status_code, theirs.content) == (never.status_code, never.content)


@attack("api", "cancel with a forged id (SQL, B's id with a tail, a path of B's)")
def _cancel_forged(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for forged_id in (
        "' OR '1'='1",
        f"{w.b.parked.id}' OR '1'='1",
        f"{w.b.parked.id}%20OR%201=1",
        "00000000-0000-0000-0000-000000000000",
        f"{w.b.held.id}x",
    ):
        refused(w, stores_nothing(w, lambda f=forged_id: cancel(client, f)), 404, echoed=forged_id)


@attack("api", "cancel B's item naming B with X-Org-ID, or in the query string")
def _cancel_b_naming_b(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    same_as_for_none(
        w,
        lambda org: cancel(client, w.b.parked.id, HTTP_X_ORG_ID=org),
        str(w.b.org_id),
        403,
        "X-Org-ID",
    )
    query = f"{API_PATH}{w.b.parked.id}/cancel?org_id={w.b.org_id}"
    response = stores_nothing(w, lambda: client.post(query, "", content_type="application/json"))
    refused(w, response, 400, "org_id", echoed=str(w.b.org_id))


# -- naming B's tenant or B's user ----------------------------------------------------------------


@attack("api", "enqueue into B naming it with X-Org-ID")
def _enqueue_header(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    same_as_for_none(
        w, lambda org: post(client, NOOP, HTTP_X_ORG_ID=org), str(w.b.org_id), 403, "X-Org-ID"
    )


@attack("api", "SQL and JSON in X-Org-ID")
def _enqueue_header_injection(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for value in (
        "' OR '1'='1",
        f"{w.b.org_id}' OR '1'='1",
        f'{{"org_id": "{w.b.org_id}"}}',
        f"{w.a.org_id},{w.b.org_id}",
    ):
        response = stores_nothing(w, lambda v=value: post(client, NOOP, HTTP_X_ORG_ID=v))
        refused(w, response, 403, "X-Org-ID", echoed=value)


@attack("api", "enqueue into B naming it in the body")
def _enqueue_body_org(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for field in ("org_id", "org", "tenant"):
        body = {**NOOP, field: str(w.b.org_id)}
        refused(w, stores_nothing(w, lambda b=body: post(client, b)), 400, field)


@attack("api", "enqueue as B's user (created_by and friends in the body)")
def _enqueue_body_author(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for field in ("created_by", "updated_by", "user_id", "id", "status", "claim_token"):
        body = {**NOOP, field: str(w.b.user_id)}
        refused(w, stores_nothing(w, lambda b=body: post(client, b)), 400, field)


@attack("api", "enqueue into B naming it in the query string")
def _enqueue_query(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for query in (f"org_id={w.b.org_id}", f"X-Org-ID={w.b.org_id}", f"org={w.b.org_id}"):
        response = stores_nothing(w, lambda q=query: post(client, NOOP, path=f"{API_PATH}?{q}"))
        refused(w, response, (400, 403), query.split("=")[0])


@attack("api", "enqueue with B's org named in the payload")
def _enqueue_payload_org(scene: Scene) -> None:
    w = scene.world
    body = {"kind": "NOOP", "payload": {"n": 1, "org_id": str(w.b.org_id)}}
    response = stores_nothing(w, lambda: post(client_of(w), body))
    refused(w, response, 400, "payload.org_id")


@attack("api", "a former member of B names B", prepare=lambda s: _former_member(s.world))
def _former_member_names_b(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    b = str(w.b.org_id)
    # As for an org A never belonged to: no sign of the membership that was.
    same_as_for_none(w, lambda org: post(client, NOOP, HTTP_X_ORG_ID=org), b, 403, "X-Org-ID")
    read = client.get(f"{API_PATH}{w.b.parked.id}", HTTP_X_ORG_ID=b)
    refused(w, read, 403, "X-Org-ID", echoed=b)


def _former_member(world: World) -> None:
    """B once had A's member as a member: the membership ended yesterday."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO workqueue_tenancy_membership"
            " (id, org_id, user_id, role, created_at, ended_at)"
            " VALUES (gen_random_uuid(), %s, %s, 'owner', now() - interval '2 days',"
            " now() - interval '1 day')",
            [world.b.org_id, world.a.user_id],
        )


# -- stored answers and idempotency keys ----------------------------------------------------------


@attack("api", "replay B's Idempotency-Key with B's very request")
def _replay_b_key(scene: Scene) -> None:
    w = scene.world
    response = post(client_of(w), API_BODY, key=w.b.answer_key)
    # A's own new item: B's stored answer is never A's to see.
    assert response.status_code == 201, response.content
    assert "Idempotent-Replayed" not in response
    nothing_of_b(w, response.content.decode())
    item = row(uuid.UUID(response.json()["item"]["id"]))
    assert (item.org_id, item.created_by) == (w.a.org_id, w.a.user_id)


@attack("api", "B's Idempotency-Key on another request: no sign that B used it")
def _probe_b_key(scene: Scene) -> None:
    w = scene.world
    response = post(client_of(w), NOOP, key=w.b.answer_key)
    # 422 (KeyReused) or 409 (KeyInFlight) would say B holds the key.
    assert response.status_code == 201, response.content
    nothing_of_b(w, response.content.decode())


@attack("api", "another user of A replays A's member's Idempotency-Key")
def _replay_colleague_key(scene: Scene) -> None:
    w = scene.world
    response = post(client_of(w, w.a.staff.user_id), API_BODY, key=w.a.answer_key)
    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert response.json()["item"]["id"] != str(w.a.answer_item)
    assert row(w.a.answer_item).created_by == w.a.user_id


@attack("api", "B's item's idempotency_key in the body")
def _body_key_of_b(scene: Scene) -> None:
    w = scene.world
    response = post(client_of(w), {**NOOP, "idempotency_key": w.b.key})
    # Inserted in A; 200 with "the existing item" would be B's.
    assert response.status_code == 201 and response.json()["outcome"] == "inserted"
    nothing_of_b(w, response.content.decode(), sent=w.b.key)


@attack("api", "a schedule's key in the body: taking a tick first to replace or suppress it")
def _body_key_of_a_schedule(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for key in ("schedule:nightly:2030-01-01T03:00:00Z", "schedule:", "schedule:x"):
        body = {**NOOP, "idempotency_key": key}
        refused(w, stores_nothing(w, lambda b=body: post(client, b)), 400, "idempotency_key")


@attack("api", "SQL and JSON in the Idempotency-Key are stored as text, run as nothing")
def _key_injection(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for key in (
        "'OR'1'='1';DELETE/**/FROM/**/workqueue_storedresponse;--",
        f'","org_id":"{w.b.org_id}","user_id":"{w.b.user_id}',
        f"{w.b.answer_key}'--",
    ):
        response = post(client, NOOP, key=key)
        assert response.status_code == 201, (key, response.content)
        stored = StoredResponse.objects.using("admin").get(key=key)
        assert (stored.org_id, stored.user_id) == (w.a.org_id, w.a.user_id)
    for key in ("'; DELETE FROM workqueue_storedresponse; --", "k\x00", "é", "x" * 201):
        response = stores_nothing(w, lambda k=key: post(client, NOOP, key=k))
        refused(w, response, 400, "Idempotency-Key")


# -- the path id ---------------------------------------------------------------------------------


@attack("api", "SQL and JSON in the path id")
def _path_injection(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    b = w.b.parked.id
    for crafted in (
        "' OR '1'='1",
        f"{b}' OR '1'='1",
        f"{b};DELETE FROM workqueue_workitem",
        "1 UNION SELECT payload FROM workqueue_workitem",
        '{"$ne": null}',
        '{"id": {"$gt": ""}}',
        "[]",
        "%00",
        "*",
        "x" * 5000,
    ):
        response = client.get(f"{API_PATH}{crafted}")
        refused(w, response, 404)


@attack("api", "B's item id spelled otherwise (braces, urn, upper case, no dashes)")
def _path_spellings(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    b = w.b.held.id
    for spelled in (f"{{{b}}}", f"urn:uuid:{b}", str(b).upper(), b.hex, f" {b}"):
        refused(w, client.get(f"{API_PATH}{spelled}"), 404)


# -- sign-in, CSRF, method, content type -----------------------------------------------------------


@attack("api", "enqueue with the session cookie and no CSRF token")
def _csrf_missing(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    client.handler.enforce_csrf_checks = True
    response = stores_nothing(w, lambda: post(client, NOOP))
    refused(w, response, 403, "CSRF")


@attack("api", "enqueue with a forged CSRF token")
def _csrf_forged(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    client.handler.enforce_csrf_checks = True
    client.cookies["csrftoken"] = "a" * 32
    for token in ("b" * 32, "' OR 1=1 --", ""):
        response = stores_nothing(w, lambda t=token: post(client, NOOP, HTTP_X_CSRFTOKEN=t))
        refused(w, response, 403, "CSRF")


@attack("api", "a cross-site form post (form-encoded, with the session)")
def _form_post(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    client.handler.enforce_csrf_checks = True
    for content_type in ("application/x-www-form-urlencoded", "text/plain", "multipart/form-data"):
        response = stores_nothing(
            w,
            lambda c=content_type: client.post(
                API_PATH, "kind=NOOP&payload={}", content_type=c, HTTP_ORIGIN="https://evil.test"
            ),
        )
        refused(w, response, (403, 415))


@attack("api", "the right body with the wrong content type")
def _content_type(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    for content_type in ("text/plain", "application/json; charset=latin-1", "application/xml"):
        response = stores_nothing(
            w, lambda c=content_type: client.post(API_PATH, json.dumps(NOOP), content_type=c)
        )
        refused(w, response, 415, "Content-Type")


@attack("api", "anonymous: enqueue, and read B's item")
def _anonymous(scene: Scene) -> None:
    w = scene.world
    client = Client()
    refused(w, stores_nothing(w, lambda: post(client, NOOP)), 401)
    # 401 for any id, B's or none: nothing said about the item before sign-in.
    refused(w, client.get(f"{API_PATH}{w.b.parked.id}"), 401)
