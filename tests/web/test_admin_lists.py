"""Work items and dead letters in the admin: lists, filters, search, detail, and who sees what.

The operator reads every tenant on the system login; a tenant's staff read theirs on the
everyday login under row-level security, with no filter of the admin's naming their tenant.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connections

from tenancy.admin_fence import BoundedPaginator
from tenancy.contexts import Role
from tests.helpers import dead_letter
from tests.web.conftest import Person
from workqueue import api
from workqueue.claim import claim
from workqueue.models import WorkItem

pytestmark = pytest.mark.usefixtures("committed")

ITEMS = "/admin/workqueue/workitem/"
DEAD = "/admin/workqueue/deadletter/"


@contextmanager
def queries(alias: str) -> Iterator[list[tuple[str, Any]]]:
    """Every statement (and its parameters) sent on ``alias``."""
    seen: list[tuple[str, Any]] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        seen.append((sql, params))
        return execute(sql, params, many, context)

    with connections[alias].execute_wrapper(wrapper):
        yield seen


def _item_reads(seen: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(sql, params) for sql, params in seen if 'FROM "workqueue_workitem"' in sql]


@pytest.fixture
def world(member, worker_rctx):  # type: ignore[no-untyped-def]
    """Tenants A and B, each with an admin-role staff member, a pending item (with a key) and a
    dead letter; A also has a NOTIFY_SHIPMENT item in lane bulk."""
    a, b = member(), member()
    rows: dict[str, WorkItem] = {}
    for name, person in (("a", a), ("b", b)):
        rows[f"{name}_pending"], _ = api.enqueue(
            person.ctx, "NOOP", {"n": 1}, idempotency_key=f"key-{name}"
        )
        rows[f"{name}_dead"] = dead_letter(
            person.ctx, worker_rctx, error=f"first line of {name}\nsecond line of {name}"
        )
    rows["a_bulk"], _ = api.enqueue(
        a.ctx,
        "NOTIFY_SHIPMENT",
        {"shipment_id": "00000000-0000-0000-0000-000000000001", "version": 1},
        lane="bulk",
    )
    return a, b, rows


def _shown(response) -> set[str]:  # type: ignore[no-untyped-def]
    """The item ids a list page shows (their checkboxes' values)."""
    return set(re.findall(r'name="_selected_action" value="([0-9a-f-]{36})"', response.text))


def _ids(*items: WorkItem) -> set[str]:
    return {str(i.id) for i in items}


def test_the_operator_lists_every_tenant_on_the_system_login(operator: Person, world) -> None:
    _, _, rows = world
    with queries("default") as on_default, queries("system") as on_system:
        response = operator.client.get(ITEMS)
    assert response.status_code == 200
    assert _shown(response) == _ids(*rows.values())
    assert _item_reads(on_system), "the operator's list reads on the system login"
    assert _item_reads(on_default) == []


def test_tenant_staff_see_their_tenant_only_and_no_filter_of_ours_names_it(world) -> None:
    a, _, rows = world
    with queries("default") as on_default, queries("system") as on_system:
        response = a.client.get(ITEMS)
    assert _shown(response) == _ids(rows["a_pending"], rows["a_dead"], rows["a_bulk"])
    reads = _item_reads(on_default)
    assert reads and _item_reads(on_system) == []
    # Row-level security does the fencing: the tenant's id is no parameter of the list's query.
    for _sql, params in reads:
        assert str(a.org_id) not in map(str, params or ())
        assert a.org_id not in (params or ())


def test_tenant_staff_get_404_for_another_tenants_item_by_its_url(world) -> None:
    a, _, rows = world
    for url in (
        f"{ITEMS}{rows['b_pending'].id}/change/",
        f"{ITEMS}{rows['b_dead'].id}/change/",
        f"{DEAD}{rows['b_dead'].id}/change/",
        f"{ITEMS}{rows['b_pending'].id}/history/",
        f"{ITEMS}00000000-0000-0000-0000-000000000000/change/",
    ):
        assert a.client.get(url).status_code == 404, url
    assert a.client.get(f"{ITEMS}{rows['a_pending'].id}/change/").status_code == 200
    # Searching for the other tenant's id or key finds nothing either.
    assert _shown(a.client.get(ITEMS, {"q": str(rows["b_pending"].id)})) == set()
    assert _shown(a.client.get(ITEMS, {"q": "key-b"})) == set()


def test_only_the_lists_own_filters_are_taken_from_the_query_string(world) -> None:
    a, b, _ = world
    # Django would filter on any field lookup; each is a scan the indexes cannot serve.
    assert a.client.get(ITEMS, {"payload__n": "1"}).status_code == 400
    assert a.client.get(ITEMS, {"org": str(b.org_id)}).status_code == 400  # no tenant filter


def test_the_operator_filters_by_tenant_kind_lane_and_status(operator: Person, world) -> None:
    a, b, rows = world
    client = operator.client
    page = client.get(ITEMS)
    assert f"?org={a.org_id}" in page.text and f"?org={b.org_id}" in page.text
    assert _shown(client.get(ITEMS, {"org": str(b.org_id)})) == _ids(
        rows["b_pending"], rows["b_dead"]
    )
    assert _shown(client.get(ITEMS, {"org": "not-a-uuid"})) == set()
    assert _shown(client.get(ITEMS, {"kind": "NOTIFY_SHIPMENT"})) == _ids(rows["a_bulk"])
    assert _shown(client.get(ITEMS, {"lane": "bulk"})) == _ids(rows["a_bulk"])
    assert _shown(client.get(ITEMS, {"status__exact": "failed"})) == _ids(
        rows["a_dead"], rows["b_dead"]
    )
    assert _shown(client.get(ITEMS, {"status__exact": "failed", "org": str(a.org_id)})) == _ids(
        rows["a_dead"]
    )


def test_search_by_exact_id_or_idempotency_key(operator: Person, world) -> None:
    _, _, rows = world
    client = operator.client
    assert _shown(client.get(ITEMS, {"q": str(rows["b_dead"].id)})) == _ids(rows["b_dead"])
    assert _shown(client.get(ITEMS, {"q": f"  {rows['b_dead'].id} "})) == _ids(rows["b_dead"])
    assert _shown(client.get(ITEMS, {"q": "key-a"})) == _ids(rows["a_pending"])
    assert _shown(client.get(ITEMS, {"q": "key"})) == set()  # exact, not a scan for substrings
    assert _shown(client.get(ITEMS, {"q": "x" * 5000})) == set()
    assert client.get(ITEMS, {"q": "' OR 1=1 --"}).status_code == 200


def test_items_are_listed_newest_first(operator: Person, world) -> None:
    _, _, rows = world
    text = operator.client.get(ITEMS).text
    shown = re.findall(r'name="_selected_action" value="([0-9a-f-]{36})"', text)
    assert shown == sorted(shown, reverse=True)  # time-ordered ids
    assert shown[0] == str(rows["a_bulk"].id)


def test_dead_letters_show_kind_tenant_attempts_first_error_line_and_age(
    operator: Person, world
) -> None:
    a, _, rows = world
    response = operator.client.get(DEAD)
    assert _shown(response) == _ids(rows["a_dead"], rows["b_dead"])
    assert "first line of a" in response.text and "second line of a" not in response.text
    assert "1/3" in response.text  # attempts of the NOOP kind's three
    assert " ago" in response.text
    staff = a.client.get(DEAD)
    assert _shown(staff) == _ids(rows["a_dead"])


def test_the_detail_page_shows_payload_full_error_claim_fields_and_history(world) -> None:
    a, _, rows = world
    dead = rows["a_dead"]
    response = a.client.get(f"{DEAD}{dead.id}/change/")
    assert response.status_code == 200
    text = response.text
    assert "first line of a\nsecond line of a" in text
    assert "&quot;n&quot;: 1" in text  # the payload, as JSON
    for label in ("Claimed by", "Claim token", "Lease expires at", "Attempts"):
        assert label in text
    assert "work.dead_lettered" in text  # the history, from the audit trail
    assert 'value="requeue_now"' in text and 'value="edit_payload"' in text
    # A pending item may be discarded or cancelled; a claimed one only cancelled (a request
    # to its holder: the item is its holder's).
    pending = a.client.get(f"{ITEMS}{rows['a_pending'].id}/change/").text
    assert 'value="discard"' in pending and 'value="requeue_now"' not in pending
    assert 'value="cancel"' in pending
    claim(a.ctx.rctx, "default", ["NOOP"], "w9", 30, 10)
    claimed = a.client.get(f"{ITEMS}{rows['a_pending'].id}/change/").text
    assert 'value="cancel"' in claimed and 'value="discard"' not in claimed
    assert 'value="requeue_now"' not in claimed
    assert "Cancel requested at" in claimed  # the request's field, empty until one is made


@pytest.mark.parametrize(
    ("role", "staff", "status"),
    [(Role.MEMBER, True, 403), (Role.ADMIN, False, 302), (Role.OWNER, True, 200)],
)
def test_only_staff_with_an_owner_or_admin_role_see_the_queue(
    member, world, role: Role, staff: bool, status: int
) -> None:
    person = member(org=None, role=role, staff=staff)
    for url in (ITEMS, DEAD):
        assert person.client.get(url).status_code == status, url


def test_a_staff_user_of_no_tenant_sees_nothing(world) -> None:
    from tests.factories import UserFactory
    from tests.web.conftest import signed_in

    client = signed_in(UserFactory(is_staff=True))
    assert client.get(ITEMS).status_code == 403
    assert client.get(DEAD).status_code == 403
    assert client.get("/admin/workqueue_workers/queuegauges/").status_code == 403


def test_a_long_list_is_counted_only_up_to_the_cap(operator: Person, world, monkeypatch) -> None:
    monkeypatch.setattr(BoundedPaginator, "cap", 3)
    response = operator.client.get(ITEMS)
    assert "more than 3 work items" in response.text
    assert "5 work items" not in response.text
    assert "2 dead letters" in operator.client.get(DEAD).text
