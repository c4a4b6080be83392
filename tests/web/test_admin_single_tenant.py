"""A single-tenant site's admin names no tenant: no tenant column or filter in the lists of
work items and dead letters, no "Org id" on an item's or an audit entry's page, no deepest
tenants on the gauges page. A site with tenants shows each to its operator."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from audit.services import append
from tests.helpers import many_dead
from tests.web.conftest import Person
from workqueue import api

pytestmark = pytest.mark.usefixtures("committed")

ITEMS = "/admin/workqueue/workitem/"
DEAD = "/admin/workqueue/deadletter/"
AUDIT = "/admin/workqueue_audit/auditentry/"
GAUGES = "/admin/workqueue_workers/queuegauges/"


@pytest.fixture
def single_tenant() -> Iterator[None]:
    with override_settings(WORKQUEUE={**settings.WORKQUEUE, "TENANCY": "single"}):
        yield


def _named_tenants(client, item_id, entry_id) -> dict[str, bool]:  # type: ignore[no-untyped-def]
    """Where each page names a tenant (a column, a filter, a field, a table)."""
    pages = {}
    for name, url in (
        ("items", ITEMS),
        ("dead", DEAD),
        ("audit", AUDIT),
        ("item_page", f"{ITEMS}{item_id}/change/"),
        ("entry_page", f"{AUDIT}{entry_id}/change/"),
        ("gauges", GAUGES),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        pages[name] = response.text
    items, dead, audit = pages["items"], pages["dead"], pages["audit"]
    item_page, entry_page, gauges = pages["item_page"], pages["entry_page"], pages["gauges"]
    return {
        "items column": 'class="column-tenant"' in items,
        "items filter": "By tenant" in items,
        "dead letters column": 'class="column-tenant"' in dead,
        "audit column": 'class="column-org_id"' in audit,
        "item's Org id": "Org id" in item_page,
        "entry's Org id": "Org id" in entry_page,
        "deepest tenants": 'id="top-tenants"' in gauges,
        "gauges scope": bool(re.search(r'id="scope">every tenant<', gauges)),
    }


def test_a_single_tenant_site_names_no_tenant(single_tenant: None, operator: Person) -> None:
    ctx = api.context()
    item, _ = api.enqueue(ctx, "NOOP", {})
    many_dead(ctx.org_id, 2)
    entry = append(ctx, "work.requeued", ("workqueue.workitem", str(item.id)))
    client = operator.client
    named = _named_tenants(client, item.id, entry.pk)
    assert not any(named.values()), named
    # The pages are whole all the same: the item's own fields, the site as the gauges' scope.
    page = client.get(f"{ITEMS}{item.id}/change/").text
    assert "NOOP" in page and "Idempotency key" in page
    assert re.search(r'id="scope">the site<', client.get(GAUGES).text)
    assert "2 dead letters" in client.get(DEAD).text


def test_a_site_with_tenants_names_them_to_its_operator(operator: Person, member) -> None:
    a = member()
    item, _ = api.enqueue(a.ctx, "NOOP", {})
    many_dead(a.org_id, 2)
    entry = append(a.ctx, "work.requeued", ("workqueue.workitem", str(item.id)))
    named = _named_tenants(operator.client, item.id, entry.pk)
    assert all(named.values()), named
