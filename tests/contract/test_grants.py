"""Every table the everyday login can reach, walked as an attacker with raw SQL would (issue 8.5).

Scoped to tenant A, the everyday login can read no row of tenant B in any table, write none,
and reach the global sign-in tables (users with their password hashes, sessions) not at all.
It cannot stall other tenants by locking a table, nor step around row-level security.
"""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import connections
from django.db.utils import DatabaseError

from tenancy.models import Org
from tenancy.rls import tables_missing_policy, tenant_tables
from tenancy.scope import tenant_scope
from tests.factories import MembershipFactory, OrgFactory, UserFactory
from tests.helpers import with_children
from workqueue import api, idempotency
from workqueue.history import keep_history

User = get_user_model()

pytestmark = pytest.mark.usefixtures("committed")

# Tables the everyday login may read although no tenant owns their rows, and why. Each is read
# only: a catalog of model names holds no tenant's data.
GLOBAL_READ_ONLY = {
    "django_content_type": "the catalog of model names the admin looks up",
    "django_migrations": "the applied migrations, which runserver compares with the code",
}


def _login() -> str:
    return connections["default"].settings_dict["USER"]


def reachable_tables() -> dict[str, set[str]]:
    """Each table (or view) the everyday login holds any right on, with those rights."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, p.privilege
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
             CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
                                     'REFERENCES', 'TRIGGER']) AS p(privilege)
             WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
               AND (has_table_privilege(%(login)s, c.oid, p.privilege)
                    OR (p.privilege IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES')
                        AND has_any_column_privilege(%(login)s, c.oid, p.privilege)))
            """,
            {"login": _login()},
        )
        found: dict[str, set[str]] = {}
        for table, privilege in cursor.fetchall():
            found.setdefault(table, set()).add(privilege)
    return found


def test_every_reachable_table_is_fenced_or_deliberately_global_and_read_only() -> None:
    # History's spans are tables too (children of the item, attempt and task record tables),
    # made by the sweep at run time: one at least, so the walk meets them.
    keep_history(86400.0, 86400.0)
    reachable = reachable_tables()
    fenced = with_children(tenant_tables())
    assert any("_done_" in table for table in fenced)
    assert tables_missing_policy(connections["admin"], fenced) == {}
    strays = {
        table: sorted(rights)
        for table, rights in reachable.items()
        if table not in fenced and not (table in GLOBAL_READ_ONLY and rights == {"SELECT"})
    }
    assert strays == {}, "tables the everyday login reaches with no tenant policy"
    for table in ("auth_user", "django_session", "auth_permission", "django_admin_log"):
        assert table not in reachable


def test_the_walk_flags_a_table_granted_without_a_policy() -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute("CREATE TABLE probe_open (org_id uuid)")
        cursor.execute(f'GRANT SELECT ON probe_open TO "{_login()}"')
    try:
        assert "probe_open" in reachable_tables()
        assert "probe_open" not in tenant_tables()
    finally:
        with connections["admin"].cursor() as cursor:
            cursor.execute("DROP TABLE probe_open")


@pytest.fixture
def two_tenants(make_ctx, worker_rctx):  # type: ignore[no-untyped-def]
    """Tenant A (the attacker's) and B, each with a member, an item and one attempt of it, an
    outbox row, an audit entry, a queue share, a shipment and a notice, a stored API answer, a
    task record, a workflow edge and a workflow step, a minute of the gauges page's charts, and
    a signed-in session for B's user."""
    from django.contrib.sessions.backends.db import SessionStore

    from audit.services import append
    from outbox.emit import emit
    from workers.demo.models import Shipment, ShipmentNotice
    from workers.django_tasks.models import TaskRecord
    from workqueue.models import (
        Attempt,
        Dependency,
        KindMinute,
        LaneMinute,
        TenantShare,
        WorkflowStep,
    )

    a, b = make_ctx(), make_ctx()
    for ctx in (a, b):
        item, _ = api.enqueue(ctx, "NOOP", {})
        TaskRecord.objects.using("admin").create(item_id=item.id, org_id=ctx.org_id)
        Attempt.objects.using("admin").create(
            org_id=ctx.org_id, item_id=item.id, attempt=1, worker="w", outcome="retried"
        )
        # An edge joins items of its tenant (the edge trigger refuses any other): the one item
        # at both ends, so each tenant still holds one row of every table.
        Dependency.objects.using("admin").create(
            org_id=ctx.org_id, parent_id=item.id, child_id=item.id
        )
        WorkflowStep.objects.using("admin").create(
            org_id=ctx.org_id, workflow_id=item.id, item_id=item.id, place=0
        )
        LaneMinute.objects.using("admin").create(
            minute=item.created_at,
            org_id=ctx.org_id,
            lane="default",
            done=1,
            failed=0,
            dead=0,
            waits=[1],
            pending=0,
        )
        KindMinute.objects.using("admin").create(
            minute=item.created_at, org_id=ctx.org_id, lane="default", kind="NOOP", runs=[1]
        )
        emit(ctx, "work.NOOP", {})
        TenantShare.objects.using("admin").create(org_id=ctx.org_id, weight=2)
        claim = idempotency.claim_key(
            ctx, "probe-key", idempotency.fingerprint("POST", "/api/work/", {})
        )
        idempotency.store_response(ctx, claim, 201, {"probe": True})
        append(ctx, "probe", ("probe", ctx.org_id))
        shipment = Shipment.objects.using("admin").create(
            org_id=ctx.org_id, reference="r", recipient_email="r@example.com"
        )
        ShipmentNotice.objects.using("admin").create(
            org_id=ctx.org_id, shipment=shipment, version=1, channel="email"
        )
    session = SessionStore()
    session["_auth_user_id"] = str(b.user_id)
    session.create()
    return a, b


def _as_tenant(org_id: uuid.UUID, sql: str, params: list | None = None):  # type: ignore[no-untyped-def]
    """Run ``sql`` as the everyday login scoped to ``org_id``; returns rows, a rowcount, or
    the error the database raised (the scope's savepoint is rolled back)."""
    try:
        with tenant_scope(org_id), connections["default"].cursor() as cursor:
            cursor.execute(sql, params or [])
            return cursor.fetchall() if cursor.description else cursor.rowcount
    except DatabaseError as exc:
        return exc


def test_scoped_to_a_no_tenant_table_shows_or_changes_a_row_of_b(two_tenants) -> None:
    a, b = two_tenants
    for table, column in tenant_tables().items():
        seen = _as_tenant(a.org_id, f"SELECT count(*) FROM {table} WHERE {column} = %s", [b.org_id])
        assert seen == [(0,)], table
        mine = _as_tenant(a.org_id, f"SELECT count(*) FROM {table} WHERE {column} = %s", [a.org_id])
        assert mine == [(1,)], table
        for write in (
            f"UPDATE {table} SET {column} = {column} WHERE {column} = %s",
            f"DELETE FROM {table} WHERE {column} = %s",
        ):
            result = _as_tenant(a.org_id, write, [b.org_id])
            assert result == 0 or isinstance(result, DatabaseError), (table, write, result)
    with connections["admin"].cursor() as cursor:
        for table, column in tenant_tables().items():
            cursor.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", [b.org_id])
            assert cursor.fetchone()[0] == 1, table


@pytest.mark.parametrize(
    "attack",
    [
        "SELECT username, password FROM auth_user",
        "UPDATE auth_user SET is_superuser = true",
        "UPDATE auth_user SET password = 'pbkdf2_sha256$1$x$y'",
        "SELECT session_key, session_data FROM django_session",
        "DELETE FROM django_session",
        "UPDATE workqueue_tenancy_org SET gone_at = now()",
        (
            "INSERT INTO workqueue_tenancy_org (id, name, slug, created_at) "
            "VALUES (gen_random_uuid(), 'x', 'x', now())"
        ),
        "UPDATE workqueue_tenancy_membership SET role = 'owner'",
        (
            "INSERT INTO workqueue_tenancy_membership (id, org_id, user_id, role, created_at) "
            "SELECT gen_random_uuid(), id, id, 'owner', now() FROM workqueue_tenancy_org"
        ),
        "DELETE FROM workqueue_audit_auditentry",
        "UPDATE workqueue_audit_auditentry SET action = 'forged'",
        "DELETE FROM workqueue_workitem",
        "UPDATE workqueue_workitem SET org_id = gen_random_uuid()",
        "UPDATE workqueue_workitem SET created_by = gen_random_uuid()",
        "UPDATE workqueue_workitem SET kind = 'EVIL'",
        "UPDATE workqueue_tenantshare SET max_in_flight = NULL, weight = 1000",
        (
            "INSERT INTO workqueue_tenantshare (org_id, weight, updated_at)"
            " SELECT id, 1000, now() FROM workqueue_tenancy_org"
        ),
        "SELECT * FROM workqueue_workers_worker",
        "UPDATE workqueue_rollupstate SET through_id = 0",
        "UPDATE workqueue_laneminute SET done = done + 1000",
        (
            "INSERT INTO workqueue_laneminute"
            " (minute, org_id, lane, done, failed, dead, waits, pending)"
            " SELECT now(), id, 'default', 1, 0, 0, '{}', 0 FROM workqueue_tenancy_org"
        ),
        "UPDATE workqueue_tasks_taskrecord SET errors = '[]'",
        "DELETE FROM workqueue_tasks_taskrecord",
        "SELECT * FROM django_admin_log",
        "DELETE FROM workqueue_storedresponse",
        "UPDATE workqueue_storedresponse SET fingerprint = 'x'",
        "UPDATE workqueue_storedresponse SET user_id = gen_random_uuid()",
        "LOCK TABLE workqueue_storedresponse IN ACCESS EXCLUSIVE MODE",
        "TRUNCATE workqueue_workitem",
        "LOCK TABLE workqueue_workitem IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE workqueue_workitem IN EXCLUSIVE MODE",
        "LOCK TABLE workqueue_workitem IN SHARE MODE",
        "LOCK TABLE workqueue_workitem IN SHARE ROW EXCLUSIVE MODE",
        "LOCK TABLE workqueue_audit_auditentry IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE workqueue_tenancy_org IN ACCESS EXCLUSIVE MODE",
        # The ready ring: no delete, no table-wide lock (every claim reads it), no partition.
        "DELETE FROM workqueue_ready",
        "UPDATE workqueue_ready SET priority = 32767",
        "TRUNCATE workqueue_ready",
        "LOCK TABLE workqueue_ready IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE workqueue_ready IN SHARE MODE",
        "SELECT * FROM workqueue_ready_1",
        (
            "INSERT INTO workqueue_ready_later"
            " (slot, id, org_id, lane, kind, priority, available_at)"
            " SELECT 0, gen_random_uuid(), id, 'default', 'NOOP', 0, now()"
            " FROM workqueue_tenancy_org"
        ),
        "TRUNCATE workqueue_ready_2",
        "LOCK TABLE workqueue_ready_3 IN ACCESS EXCLUSIVE MODE",
        "ALTER TABLE workqueue_workitem DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE workqueue_workitem NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY tenant_isolation ON workqueue_workitem",
        "SET ROLE workqueue_system",
        "SET SESSION AUTHORIZATION workqueue_system",
        "ALTER ROLE CURRENT_USER BYPASSRLS",
        "CREATE TABLE probe_mine (id int)",
        "CREATE OR REPLACE FUNCTION probe_fn() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    ],
)
def test_the_everyday_login_is_refused(two_tenants, attack: str) -> None:
    a, _ = two_tenants
    result = _as_tenant(a.org_id, attack)
    assert isinstance(result, DatabaseError), f"{attack!r} was allowed: {result!r}"


def test_the_org_table_shows_only_the_scoped_org(two_tenants) -> None:
    a, b = two_tenants
    assert _as_tenant(a.org_id, "SELECT id FROM workqueue_tenancy_org") == [(a.org_id,)]
    assert _as_tenant(
        a.org_id, "SELECT count(*) FROM workqueue_tenancy_org WHERE id = %s", [b.org_id]
    ) == [(0,)]


def test_sign_in_still_works_through_the_system_login(two_tenants) -> None:
    """The sign-in tables are routed to the system login (tenancy/routers.py)."""
    _, b = two_tenants
    user = User.objects.get(pk=b.user_id)
    assert user._state.db == "system"
    assert Session.objects.count() == 1
    assert Org.objects.using("system").count() == 2


def test_an_admin_member_of_one_tenant_reads_no_other_users() -> None:
    mine = MembershipFactory()
    UserFactory.create_batch(3)
    result = _as_tenant(mine.org_id, "SELECT count(*) FROM auth_user")
    assert isinstance(result, DatabaseError)
    assert OrgFactory()  # the factories (owner login) are unaffected


def test_a_migrate_backwards_leaves_the_grants_for_the_code_that_matches() -> None:
    """The reference site's post-migrate grants name this code's tables: after a migrate
    backwards (some gone) they wait, saying why, instead of failing on a missing table."""
    import io

    from project.apps import grant_logins
    from wqcore.conf import owner_alias

    out = io.StringIO()
    with connections[owner_alias()].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM information_schema.role_table_grants")
        before = cursor.fetchone()
    grant_logins(using=owner_alias(), plan=[(object(), True)], stdout=out)
    with connections[owner_alias()].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM information_schema.role_table_grants")
        assert cursor.fetchone() == before
    assert "run manage.py grant_logins" in out.getvalue()
