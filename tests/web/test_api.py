"""The enqueue API: POST /api/work/ and GET /api/work/<id>, every answer."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections
from django.test import Client

from tenancy.contexts import SYSTEM_ACTOR
from tests.factories import MembershipFactory, UserFactory
from tests.helpers import row
from tests.web.conftest import Person, signed_in
from workqueue import api, runtime
from workqueue.models import StoredResponse, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

URL = "/api/work/"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def post(client: Client, body, *, key: str | None = None, **headers):  # type: ignore[no-untyped-def]
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(URL, data, content_type="application/json", **headers)


def _count() -> int:
    return WorkItem.objects.using("admin").count()


@pytest.fixture
def alice(member) -> Person:  # type: ignore[no-untyped-def]
    """A plain member (not staff): the API is for every signed-in member."""
    return member(role="member", staff=False)


def test_a_concurrency_key_is_stored_and_shown(alice: Person) -> None:
    response = post(alice.client, {"kind": "NOOP", "payload": {}, "concurrency_key": "order:9"})
    assert response.status_code == 201, response.content
    item = response.json()["item"]
    assert item["concurrency_key"] == "order:9"
    assert row(item["id"]).concurrency_key == "order:9"
    shown = alice.client.get(f"{URL}{item['id']}").json()
    assert shown["item"]["concurrency_key"] == "order:9"


def test_a_member_enqueues_and_gets_201_with_the_item(alice: Person, settings) -> None:
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "bulk"]}
    response = post(
        alice.client,
        {
            "kind": "NOOP",
            "payload": {"n": 3},
            "idempotency_key": "order-1",
            "run_at": "2030-01-01T09:00:00Z",
            "priority": 5,
            "lane": "bulk",
        },
        HTTP_TRACEPARENT=TRACEPARENT,
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["outcome"] == "inserted"
    item = body["item"]
    assert response["Location"] == f"/api/work/{item['id']}"
    assert (item["kind"], item["payload"], item["status"], item["lane"]) == (
        "NOOP",
        {"n": 3},
        "pending",
        "bulk",
    )
    assert (item["priority"], item["idempotency_key"]) == (5, "order-1")
    assert item["run_at"].startswith("2030-01-01T09:00:00")
    assert "claim_token" not in item
    stored = row(item["id"])
    # The tenant and the author come from the signed-in member, never from the body.
    assert (stored.org_id, stored.created_by) == (alice.org_id, str(alice.user.pk))
    # The enqueue records the request's trace: the server span continues the caller's trace.
    assert stored.traceparent is not None
    assert stored.traceparent.split("-")[1] == TRACEPARENT.split("-")[1]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"kind": "NOPE", "payload": {}}, "kind", "unknown work kind"),
        ({"kind": "NOOP", "payload": {"n": "x"}}, "payload.n", "valid integer"),
        ({"kind": "NOOP", "payload": {"typo": 1}}, "payload.typo", "Extra inputs"),
        ({"kind": "NOOP", "payload": []}, "payload", "must be a JSON object"),
        ({"kind": "NOOP"}, "payload", "required"),
        ({"payload": {}}, "kind", "required"),
        ({"kind": 5, "payload": {}}, "kind", "unknown work kind"),
        ({"kind": "NOOP", "payload": {}, "created_by": "x"}, "created_by", "unknown field"),
        ({"kind": "NOOP", "payload": {}, "org_id": "x"}, "org_id", "unknown field"),
        ({"kind": "NOOP", "payload": {}, "status": "done"}, "status", "unknown field"),
        ({"kind": "NOOP", "payload": {}, "run_at": "tomorrow"}, "run_at", "ISO 8601"),
        ({"kind": "NOOP", "payload": {}, "run_at": "2030-01-01T09:00:00"}, "run_at", "ISO"),
        ({"kind": "NOOP", "payload": {}, "run_at": 12}, "run_at", "ISO 8601"),
        ({"kind": "NOOP", "payload": {}, "priority": True}, "priority", "integer"),
        ({"kind": "NOOP", "payload": {}, "priority": 99999}, "priority", "integer"),
        ({"kind": "NOOP", "payload": {}, "priority": "1"}, "priority", "integer"),
        ({"kind": "NOOP", "payload": {}, "lane": "a b"}, "lane", "letters, digits"),
        ({"kind": "NOOP", "payload": {}, "lane": ""}, "lane", "non-empty"),
        ({"kind": "NOOP", "payload": {}, "idempotency_key": "k" * 201}, "idempotency_key", "at"),
        ({"kind": "NOOP", "payload": {}, "idempotency_key": "a\x00b"}, "idempotency_key", "NUL"),
        ({"kind": "NOOP", "payload": {}, "idempotency_key": 7}, "idempotency_key", "string"),
        ({"kind": "NOOP", "payload": {"sleep_s": "\ud800"}}, "payload.sleep_s", ""),
        ([1, 2], "body", "must be a JSON object"),
        ("not json", "body", "not valid JSON"),
        ('{"kind": "NOOP", "payload": {"n": NaN}}', "body", "NaN is not JSON"),
        ('{"kind": "NOOP", "payload": {"n": Infinity}}', "body", "Infinity is not JSON"),
        (b"\xff\xfe{}", "body", "UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "body", ""),
    ],
)
def test_a_bad_body_is_400_naming_the_field_and_stores_nothing(
    alice: Person, body, field: str, says: str
) -> None:
    response = post(alice.client, body, key="k-bad")
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["field"] == field and says in answer["error"]
    assert _count() == 0
    assert StoredResponse.objects.using("admin").count() == 0


def test_a_bad_body_lists_every_field_at_fault(alice: Person) -> None:
    response = post(alice.client, {"payload": {}, "status": "done", "org_id": "x"}, key="k-bad")
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["field"] == "org_id"
    for said in ("org_id: unknown field (a body has", "status: unknown field", "kind: required"):
        assert said in answer["error"], answer
    assert _count() == 0


def test_a_lane_the_site_does_not_declare_is_400_and_stores_nothing(
    alice: Person, settings
) -> None:
    # Found by an outside suite: every made-up lane became new series on every /metrics.
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", "bulk"]}
    for lane in ("made-up", "bulk2", "DEFAULT"):
        response = post(alice.client, {"kind": "NOOP", "payload": {}, "lane": lane})
        assert response.status_code == 400, response.content
        answer = response.json()
        assert answer["field"] == "lane"
        assert "not a lane this site declares (declared: bulk, default)" in answer["error"]
        assert "WORKQUEUE['LANES']" in answer["error"]
    assert _count() == 0
    # A declared lane, and a kind's own lane (no lane given), are taken.
    assert post(alice.client, {"kind": "NOOP", "payload": {}, "lane": "bulk"}).status_code == 201
    assert post(alice.client, {"kind": "NOOP", "payload": {}}).status_code == 201


def test_anonymous_callers_get_401(alice: Person) -> None:
    item, _ = api.enqueue(alice.ctx, "NOOP", {})
    client = Client()
    refused = post(client, {"kind": "NOOP", "payload": {}})
    assert refused.status_code == 401
    # The reference site's LOGIN_URL is the name of its sign-in page, resolved.
    assert refused.json()["error"] == "sign in first (a session cookie from /login/)"
    assert client.get(f"{URL}{item.id}").status_code == 401
    assert _count() == 1


@pytest.mark.parametrize(
    ("login_url", "shown"),
    [
        ("/accounts/login/", "/accounts/login/"),
        ("admin:login", "/admin/login/"),
        ("nowhere", "nowhere"),
    ],
)
def test_the_401_names_the_sites_own_sign_in_url(
    alice: Person, settings, login_url: str, shown: str
) -> None:
    settings.LOGIN_URL = login_url
    refused = post(Client(), {"kind": "NOOP", "payload": {}})
    assert refused.status_code == 401
    assert refused.json()["error"] == f"sign in first (a session cookie from {shown})"


def test_a_session_post_without_the_csrf_token_is_403(alice: Person) -> None:
    client = signed_in(alice.user, enforce_csrf_checks=True)
    response = post(client, {"kind": "NOOP", "payload": {}})
    assert response.status_code == 403 and "CSRF" in response.json()["error"]
    client.get("/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    ok = post(client, {"kind": "NOOP", "payload": {}}, HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 201


def test_a_user_of_no_tenant_is_403() -> None:
    client = signed_in(UserFactory())
    response = post(client, {"kind": "NOOP", "payload": {}})
    assert response.status_code == 403 and "not a member" in response.json()["error"]
    assert _count() == 0


def test_a_member_of_several_tenants_names_one_and_is_refused_another(
    alice: Person, member
) -> None:
    second = MembershipFactory(user=alice.user)
    named = post(alice.client, {"kind": "NOOP", "payload": {}}, HTTP_X_ORG_ID=str(second.org_id))
    assert named.status_code == 201
    assert row(named.json()["item"]["id"]).org_id == second.org_id
    stranger = member()
    refused = post(
        alice.client, {"kind": "NOOP", "payload": {}}, HTTP_X_ORG_ID=str(stranger.org_id)
    )
    assert refused.status_code == 403 and "not a member" in refused.json()["error"]
    garbage = post(alice.client, {"kind": "NOOP", "payload": {}}, HTTP_X_ORG_ID="'; DROP")
    assert garbage.status_code == 403
    assert _count() == 1


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_other_methods_on_the_collection_are_405(alice: Person, method: str) -> None:
    response = getattr(alice.client, method)(URL)
    assert response.status_code == 405 and response["Allow"] == "POST"


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_other_methods_on_an_item_are_405(alice: Person, method: str) -> None:
    item, _ = api.enqueue(alice.ctx, "NOOP", {})
    response = getattr(alice.client, method)(f"{URL}{item.id}")
    assert response.status_code == 405 and response["Allow"] == "GET"
    assert row(item.id).status == "pending"


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin-1",
        "",
    ],
)
def test_a_body_that_is_not_json_is_415(alice: Person, content_type: str) -> None:
    response = alice.client.post(URL, '{"kind": "NOOP", "payload": {}}', content_type=content_type)
    assert response.status_code == 415 and response.json()["field"] == "Content-Type"
    assert _count() == 0


def test_json_with_a_utf8_charset_is_taken(alice: Person) -> None:
    response = alice.client.post(
        URL, '{"kind": "NOOP", "payload": {}}', content_type="application/json; charset=UTF-8"
    )
    assert response.status_code == 201


def test_the_idempotency_key_header_replays_the_first_answer(alice: Person) -> None:
    body = {"kind": "NOOP", "payload": {"n": 1}}
    first = post(alice.client, body, key="req-1")
    assert first.status_code == 201
    # The same request again, with its keys in another order: the stored answer, 200.
    again = post(alice.client, '{"payload": {"n": 1}, "kind": "NOOP"}', key="req-1")
    assert again.status_code == 200
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert _count() == 1
    # Another body under the same key: 422, nothing enqueued.
    other = post(alice.client, {"kind": "NOOP", "payload": {"n": 2}}, key="req-1")
    assert other.status_code == 422 and other.json()["field"] == "Idempotency-Key"
    assert _count() == 1
    # The key is the user's own: another member of the same tenant starts afresh.
    bob = signed_in(MembershipFactory(org_id=alice.org_id).user)
    assert post(bob, body, key="req-1").status_code == 201
    assert _count() == 2


def test_a_refused_request_leaves_its_key_free(alice: Person) -> None:
    bad = post(alice.client, {"kind": "NOOP", "payload": {"n": "x"}}, key="req-2")
    good = post(alice.client, {"kind": "NOOP", "payload": {"n": 1}}, key="req-2")
    assert (bad.status_code, good.status_code) == (400, 201)


@pytest.mark.parametrize("key", ["", "k" * 201, "spaces in key", "é"])
def test_a_malformed_idempotency_key_is_400(alice: Person, key: str) -> None:
    response = post(alice.client, {"kind": "NOOP", "payload": {}}, key=key)
    assert response.status_code == 400 and response.json()["field"] == "Idempotency-Key"
    assert _count() == 0


def test_the_body_idempotency_key_returns_the_existing_item_with_200(alice: Person) -> None:
    first = post(alice.client, {"kind": "NOOP", "payload": {}, "idempotency_key": "once"})
    again = post(alice.client, {"kind": "NOOP", "payload": {"n": 9}, "idempotency_key": "once"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["outcome"] == "key_exists"
    assert again.json()["item"]["id"] == first.json()["item"]["id"]
    assert again.json()["item"]["payload"] == {}


def test_racing_retries_with_one_key_enqueue_once(alice: Person) -> None:
    """Two requests with the same key at once: the second waits on the key until the first
    commits, then answers with the first's answer."""
    answers: list[tuple[int, dict]] = []
    barrier = threading.Barrier(2)

    def send() -> None:
        client = signed_in(alice.user)
        try:
            barrier.wait(5)
            response = post(client, {"kind": "NOOP", "payload": {"n": 1}}, key="race")
            answers.append((response.status_code, response.json()))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert sorted(code for code, _ in answers) == [200, 201]
    assert answers[0][1] == answers[1][1]
    assert _count() == 1


def test_stored_answers_are_purged_after_their_retention(alice: Person, worker_rctx) -> None:
    post(alice.client, {"kind": "NOOP", "payload": {}}, key="old")
    post(alice.client, {"kind": "NOOP", "payload": {}}, key="new")
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_storedresponse SET created_at = now() - interval '2 days'"
            " WHERE key = 'old'"
        )
    cutoff = datetime.now(UTC) - timedelta(days=1)
    assert runtime.purge_request_keys(worker_rctx, cutoff, batch=1) == 1
    assert list(StoredResponse.objects.using("admin").values_list("key", flat=True)) == ["new"]
    # A retry after the purge is answered anew (the item is not enqueued twice only while
    # the answer is kept).
    assert post(alice.client, {"kind": "NOOP", "payload": {}}, key="old").status_code == 201


def test_the_purge_is_bounded(alice: Person, worker_rctx) -> None:
    for i in range(5):
        post(alice.client, {"kind": "NOOP", "payload": {}}, key=f"k{i}")
    future = datetime.now(UTC) + timedelta(days=1)
    assert runtime.purge_request_keys(worker_rctx, future, batch=2, max_batches=2) == 4
    assert StoredResponse.objects.using("admin").count() == 1


def test_get_returns_the_items_status_to_its_tenant_only(alice: Person, member) -> None:
    created = post(alice.client, {"kind": "NOOP", "payload": {}}).json()["item"]
    for url in (f"{URL}{created['id']}", f"{URL}{created['id']}/"):
        mine = alice.client.get(url)
        assert mine.status_code == 200 and mine.json()["item"]["status"] == "pending"
    stranger = member()
    theirs = stranger.client.get(f"{URL}{created['id']}")
    assert theirs.status_code == 404 and theirs.json() == {
        "error": "no such work item in your tenant"
    }
    for bad in (SYSTEM_ACTOR, "not-a-uuid", "1' OR '1'='1", "x" * 500):
        response = alice.client.get(f"{URL}{bad}")
        assert response.status_code == 404, bad
        assert response.json()["error"] == "no such work item in your tenant"


def test_a_request_too_large_is_refused_with_one_line(alice: Person, settings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = post(alice.client, {"kind": "NOOP", "payload": {"n": 1}, "lane": "x" * 2000})
    assert response.status_code == 413 and response.json()["field"] == "body"
    assert _count() == 0
