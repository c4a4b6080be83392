"""Row-level security: the second fence, on the product's real logins."""

from __future__ import annotations

import uuid

import pytest
from django.db import connections, transaction
from django.db.utils import ProgrammingError

from tenancy.models import Membership
from tenancy.rls import tables_missing_policy, tenant_tables
from tenancy.scope import system_scope, tenant_scope
from tests.factories import MembershipFactory, OrgFactory
from tests.helpers import with_children
from workqueue.checks import login_problems
from workqueue.history import keep_history

pytestmark = pytest.mark.usefixtures("committed")


def _current_tenant(using: str = "default") -> str:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT current_setting('app.org_id', true)")
        return cursor.fetchone()[0] or ""


def test_every_model_with_an_org_carries_the_policy() -> None:
    tables = tenant_tables()
    assert {"workqueue_tenancy_membership", "workqueue_audit_auditentry"} <= set(tables)
    assert tables_missing_policy(connections["admin"], tables) == {}
    # History's spans take their parent's policies (workqueue/history.py).
    keep_history(86400.0, 86400.0)
    spans = with_children(tables)
    assert len(spans) > len(tables)
    assert tables_missing_policy(connections["admin"], spans) == {}


def test_the_policy_check_flags_a_table_without_it() -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute("CREATE TABLE probe_bare (org_id uuid)")
        cursor.execute("CREATE TABLE probe_unforced (org_id uuid)")
        cursor.execute("ALTER TABLE probe_unforced ENABLE ROW LEVEL SECURITY")
        # The tenant policy without the owner's all-tenants one.
        cursor.execute("CREATE TABLE probe_no_owner (org_id uuid)")
        cursor.execute("ALTER TABLE probe_no_owner ENABLE ROW LEVEL SECURITY")
        cursor.execute("ALTER TABLE probe_no_owner FORCE ROW LEVEL SECURITY")
        cursor.execute(
            "CREATE POLICY tenant_isolation ON probe_no_owner"
            " USING (org_id = NULLIF(current_setting('app.org_id', true), '')::uuid)"
            " WITH CHECK (org_id = NULLIF(current_setting('app.org_id', true), '')::uuid)"
        )
    try:
        missing = tables_missing_policy(
            connections["admin"],
            ["probe_bare", "probe_unforced", "probe_no_owner", "workqueue_tenancy_membership"],
        )
        assert missing == {
            "probe_bare": "missing ENABLE, FORCE, policy, owner policy",
            "probe_unforced": "missing FORCE, policy, owner policy",
            "probe_no_owner": "missing owner policy",
        }
    finally:
        with connections["admin"].cursor() as cursor:
            cursor.execute("DROP TABLE probe_bare, probe_unforced, probe_no_owner")


def test_everyday_login_without_a_tenant_sees_nothing() -> None:
    MembershipFactory.create_batch(3)
    assert Membership.objects.using("admin").count() == 3
    assert Membership.objects.count() == 0


def test_a_tenant_sees_only_its_own_rows() -> None:
    a, b = OrgFactory(), OrgFactory()
    MembershipFactory.create_batch(2, org=a)
    MembershipFactory(org=b)
    with tenant_scope(a.pk):
        assert set(Membership.objects.values_list("org_id", flat=True)) == {a.pk}
        assert Membership.objects.count() == 2
    with tenant_scope(b.pk):
        assert Membership.objects.count() == 1


def test_writing_another_tenants_row_is_refused() -> None:
    """On a table the everyday login may write (shipments), the policy's WITH CHECK refuses a
    row of another tenant and its USING hides the other tenant's rows from UPDATE."""
    from workers.demo.models import Shipment

    a, b = OrgFactory(), OrgFactory()
    mine = Shipment.objects.using("admin").create(
        org_id=a.pk, reference="a", recipient_email="a@x.io"
    )
    theirs = Shipment.objects.using("admin").create(
        org_id=b.pk, reference="b", recipient_email="b@x.io"
    )
    with pytest.raises(ProgrammingError, match="row-level security"):
        with tenant_scope(a.pk):
            Shipment.objects.create(org_id=b.pk, reference="c", recipient_email="c@x.io")
    with tenant_scope(a.pk):
        assert Shipment.objects.filter(pk=theirs.pk).update(status="delivered") == 0
        assert Shipment.objects.filter(pk=mine.pk).update(status="delivered") == 1
    assert Shipment.objects.using("admin").get(pk=theirs.pk).status == "created"


def test_memberships_are_read_only_to_the_everyday_login() -> None:
    a = OrgFactory()
    mine = MembershipFactory(org=a)
    for write in (
        lambda: Membership.objects.create(org=a, user=mine.user),
        lambda: Membership.objects.filter(pk=mine.pk).update(role="owner"),
        lambda: Membership.objects.filter(pk=mine.pk).delete(),
    ):
        with pytest.raises(ProgrammingError, match="permission denied"):
            with tenant_scope(a.pk):
                write()
    assert Membership.objects.using("admin").get(pk=mine.pk).role == "member"


def test_the_system_login_sees_every_tenant() -> None:
    MembershipFactory.create_batch(2)
    with system_scope() as using:
        assert Membership.objects.using(using).count() == 2


def test_a_tenant_set_in_a_nested_atomic_does_not_leak() -> None:
    a, b = OrgFactory(), OrgFactory()
    MembershipFactory(org=a)
    with transaction.atomic():
        with tenant_scope(b.pk):
            assert _current_tenant() == str(b.pk)
        assert _current_tenant() == ""
        assert Membership.objects.count() == 0
        with tenant_scope(a.pk):
            with tenant_scope(b.pk):
                assert Membership.objects.count() == 0
            assert _current_tenant() == str(a.pk)
            assert Membership.objects.count() == 1
    assert _current_tenant() == ""
    assert Membership.objects.count() == 0


def test_a_failed_nested_scope_rolls_back_to_the_outer_tenant() -> None:
    a, b = OrgFactory(), OrgFactory()
    with tenant_scope(a.pk):
        with pytest.raises(RuntimeError):
            with tenant_scope(b.pk):
                raise RuntimeError("boom")
        assert _current_tenant() == str(a.pk)


def test_the_logins_are_what_the_fence_needs() -> None:
    assert login_problems("default") is None
    assert "superuser" in (login_problems("admin") or "")
    assert "BYPASSRLS" in (login_problems("system") or "")


def test_an_unknown_tenant_id_reads_nothing() -> None:
    MembershipFactory()
    with tenant_scope(uuid.uuid4()):
        assert Membership.objects.count() == 0
