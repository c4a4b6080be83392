"""Users, orgs, memberships and the audit trail in the admin: the operator manages every
tenant on the system login; a tenant's staff read their own, under row-level security."""

from __future__ import annotations

import pytest

from audit.services import append
from tenancy.contexts import Role
from tenancy.models import Membership, Org
from tests.factories import OrgFactory, UserFactory
from tests.web.conftest import Person

pytestmark = pytest.mark.usefixtures("committed")


def test_the_operator_sees_and_manages_users_orgs_and_memberships(operator: Person, member) -> None:
    a, b = member(), member()
    client = operator.client
    users = client.get("/admin/auth/user/")
    assert users.status_code == 200
    assert a.user.username in users.text and b.user.username in users.text
    orgs = client.get("/admin/workqueue_tenancy/org/").text
    assert str(a.org_id) in orgs and str(b.org_id) in orgs
    members = client.get("/admin/workqueue_tenancy/membership/").text
    assert a.user.username in members and b.user.username in members
    # A new org, then a member of it: written on the system login.
    created = client.post("/admin/workqueue_tenancy/org/add/", {"name": "Acme", "slug": "acme"})
    assert created.status_code == 302, created.content
    acme = Org.objects.using("admin").get(slug="acme")
    person = UserFactory()
    added = client.post(
        "/admin/workqueue_tenancy/membership/add/",
        {"org": str(acme.pk), "user": str(person.pk), "role": "admin"},
    )
    assert added.status_code == 302, added.content
    assert Membership.objects.using("admin").get(user=person).org_id == acme.pk


def test_the_operators_unique_checks_see_every_tenant(operator: Person, member) -> None:
    a = member()
    taken = Org.objects.using("admin").get(pk=a.org_id).slug
    response = operator.client.post(
        "/admin/workqueue_tenancy/org/add/", {"name": "X", "slug": taken}
    )
    assert response.status_code == 200 and "An org with this slug already exists" in response.text
    twice = operator.client.post(
        "/admin/workqueue_tenancy/membership/add/",
        {"org": str(a.org_id), "user": str(a.user.pk), "role": "member"},
    )
    assert twice.status_code == 200 and "already exists" in twice.text
    assert Membership.objects.using("admin").filter(user=a.user).count() == 1


def test_the_service_role_is_never_given_to_a_person(operator: Person) -> None:
    org, person = OrgFactory(), UserFactory()
    response = operator.client.post(
        "/admin/workqueue_tenancy/membership/add/",
        {"org": str(org.pk), "user": str(person.pk), "role": Role.SERVICE},
    )
    assert response.status_code == 200 and "Select a valid choice" in response.text
    assert not Membership.objects.using("admin").filter(user=person).exists()


def test_tenant_staff_read_their_org_and_members_only(member) -> None:
    a, b = member(), member()
    colleague = member(org=Org.objects.using("admin").get(pk=a.org_id), role=Role.MEMBER)
    client = a.client
    assert client.get("/admin/auth/user/").status_code == 403
    orgs = client.get("/admin/workqueue_tenancy/org/").text
    assert str(a.org_id) in orgs and str(b.org_id) not in orgs
    assert client.get(f"/admin/workqueue_tenancy/org/{b.org_id}/change/").status_code == 404
    members = client.get("/admin/workqueue_tenancy/membership/").text
    assert colleague.user.username in members  # usernames read through the membership
    assert b.user.username not in members
    # Read-only: no add, no change.
    assert client.get("/admin/workqueue_tenancy/org/add/").status_code == 403
    response = client.post(
        f"/admin/workqueue_tenancy/org/{a.org_id}/change/", {"name": "mine now", "slug": "mine"}
    )
    assert response.status_code == 403
    assert Org.objects.using("admin").get(pk=a.org_id).name != "mine now"


def test_audit_entries_are_read_only_and_fenced_by_tenant(operator: Person, member) -> None:
    a, b = member(), member()
    mine = append(a.ctx, "work.requeued", ("workqueue.workitem", "item-a"), {"x": 1})
    theirs = append(b.ctx, "work.requeued", ("workqueue.workitem", "item-b"), {"x": 2})
    listing = a.client.get("/admin/workqueue_audit/auditentry/").text
    assert "item-a" in listing and "item-b" not in listing
    assert a.client.get(f"/admin/workqueue_audit/auditentry/{theirs.pk}/change/").status_code == 404
    detail = a.client.get(f"/admin/workqueue_audit/auditentry/{mine.pk}/change/")
    assert detail.status_code == 200 and "Save" not in detail.text
    assert a.client.get("/admin/workqueue_audit/auditentry/add/").status_code == 403
    assert a.client.post(f"/admin/workqueue_audit/auditentry/{mine.pk}/delete/").status_code == 403
    everyone = operator.client.get("/admin/workqueue_audit/auditentry/").text
    assert "item-a" in everyone and "item-b" in everyone
    found = operator.client.get("/admin/workqueue_audit/auditentry/", {"q": "item-b"}).text
    assert "item-b" in found and "item-a" not in found
    by_actor = operator.client.get("/admin/workqueue_audit/auditentry/", {"q": str(a.user.pk)}).text
    assert "item-a" in by_actor and "item-b" not in by_actor
    filtered = operator.client.get(
        "/admin/workqueue_audit/auditentry/", {"action": "work.discarded"}
    )
    assert "item-a" not in filtered.text
