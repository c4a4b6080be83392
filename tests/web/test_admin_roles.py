"""The queue's admin roles: the read-only viewer (staff in the viewers' group) reads every
tenant's pages and acts on nothing, every post refused with the database unchanged; and the
support view, in which the operator (or a viewer) sees one tenant through its row-level
security, another tenant's item a 404, each page and action an audit entry naming them."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connections

from audit.models import AuditEntry
from tenancy.roles import ensure_viewer_group, viewer_group
from tenancy.support import SESSION_KEY
from tests.factories import UserFactory
from tests.helpers import dead_letter, queue_settings, row
from tests.web.conftest import Person, signed_in
from tests.web.test_admin_workflows import page_of, stuck_group
from workqueue.models import Status

pytestmark = pytest.mark.usefixtures("committed")

DEAD = "/admin/workqueue/deadletter/"
ITEMS = "/admin/workqueue/workitem/"
SUPPORT = "/admin/workqueue_tenancy/org/support/"


def _snapshot() -> tuple[Any, ...]:
    """Everything a refused post could have changed: the items and the audit trail."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT array_agg((id, status, updated_at, attempts) ORDER BY id)::text"
            "          FROM workqueue_workitem),"
            "       (SELECT count(*) FROM workqueue_audit_auditentry),"
            "       (SELECT count(*) FROM workqueue_pause)"
        )
        found: tuple[Any, ...] = cursor.fetchone()
        return found


@pytest.fixture
def viewer(committed: None) -> Person:
    ensure_viewer_group("admin")
    user = UserFactory(is_staff=True)
    user.groups.add(Group.objects.using("admin").get(name=viewer_group()))
    return Person(user, signed_in(user))


def test_the_viewers_group_is_made_after_each_migrate_once() -> None:
    from django.core.management.sql import emit_post_migrate_signal

    Group.objects.using("admin").filter(name=viewer_group()).delete()
    for _ in range(2):
        emit_post_migrate_signal(verbosity=0, interactive=False, db="admin")
    assert Group.objects.using("admin").filter(name=viewer_group()).count() == 1


def test_a_site_without_viewers_makes_no_group_and_reads_no_member_as_one(viewer: Person) -> None:
    named = viewer_group()
    with queue_settings(VIEWER_GROUP=""):
        # Staff in no tenant, in the group, and no viewer: the queue's admin is not theirs.
        assert viewer.client.get(DEAD).status_code == 403
        Group.objects.using("admin").filter(name=named).delete()
        ensure_viewer_group("admin")
        assert not Group.objects.using("admin").exists()


def test_a_viewer_reads_every_tenant_and_every_post_is_refused(
    viewer: Person, member, worker_rctx
) -> None:
    a, b = member(), member()
    declared, _, dead = stuck_group(a.ctx, worker_rctx)
    other = dead_letter(b.ctx, worker_rctx, error="B's gateway")
    # Every tenant's rows, on every page.
    listed = viewer.client.get(DEAD)
    assert listed.status_code == 200
    assert str(dead.id)[-12:] in listed.text and str(other.id)[-12:] in listed.text
    triage = viewer.client.get(f"{DEAD}{dead.id}/change/")
    assert triage.status_code == 200 and "the gateway said no" in triage.text
    assert 'name="triage"' not in triage.text, "no action offered"
    assert 'id="read-only"' in triage.text
    assert 'id="dry-run-link"' not in triage.text
    assert 'name="action"' not in listed.text, "no action menu on the list"
    workflow = viewer.client.get(page_of(declared.workflow_id))
    assert workflow.status_code == 200 and 'id="cancel-workflow"' not in workflow.text
    assert viewer.client.get("/admin/workqueue_workers/queuegauges/").status_code == 200
    assert viewer.client.get("/admin/workqueue/pause/").status_code == 200
    assert viewer.client.get("/admin/workqueue/pause/add/").status_code == 403
    before = _snapshot()
    posts = [
        (DEAD, {"action": "requeue_now", "_selected_action": [str(dead.id)]}),
        (DEAD, {"action": "requeue_now", "_selected_action": [str(dead.id)], "confirm": "yes"}),
        (DEAD, {"action": "discard", "_selected_action": [str(other.id)], "confirm": "yes"}),
        (f"{page_of(declared.workflow_id)}cancel/", {"confirm": "yes"}),
        (f"{DEAD}{dead.id}/dry-run/", {"confirm": "yes"}),
        ("/admin/workqueue/pause/add/", {"lane": "default", "reason": "no"}),
        ("/admin/workqueue_workers/queuegauges/schedules/x/toggle/", {"action": "pause"}),
        (f"{ITEMS}{dead.id}/change/", {"status": "done"}),
    ]
    for url, data in posts:
        refused = viewer.client.post(url, data)
        assert refused.status_code == 403, (url, refused.status_code)
    assert _snapshot() == before
    assert row(dead.id).status == Status.FAILED


def test_the_support_view_shows_one_tenant_and_audits_each_page(
    operator: Person, member, worker_rctx
) -> None:
    a, b = member(), member()
    mine = dead_letter(a.ctx, worker_rctx, error="A's gateway")
    theirs = dead_letter(b.ctx, worker_rctx, error="B's gateway")
    b_flow, _, _ = stuck_group(b.ctx, worker_rctx, lane="wf-of-b")
    # Outside the support view the operator sees both.
    both = operator.client.get(DEAD).text
    assert "A&#x27;s gateway" in both and "B&#x27;s gateway" in both
    assert operator.client.get(page_of(b_flow.workflow_id)).status_code == 200
    chooser = operator.client.get(SUPPORT)
    assert chooser.status_code == 200 and str(a.org_id) in chooser.text
    began = operator.client.post(SUPPORT, {"action": "begin", "org": str(a.org_id)})
    assert began.status_code == 302
    assert operator.client.session[SESSION_KEY] == str(a.org_id)
    listed = operator.client.get(DEAD)
    assert listed.status_code == 200
    assert "A&#x27;s gateway" in listed.text and "B&#x27;s gateway" not in listed.text
    assert 'id="support-leave"' in listed.text, "the banner says how to leave"
    assert operator.client.get(f"{DEAD}{mine.id}/change/").status_code == 200
    assert operator.client.get(f"{DEAD}{theirs.id}/change/").status_code == 404
    assert operator.client.get(f"{ITEMS}{theirs.id}/change/").status_code == 404
    assert operator.client.get(page_of(b_flow.workflow_id)).status_code == 404
    # The operator's own pages are not the tenant's.
    assert operator.client.get("/admin/workqueue/pause/").status_code == 403
    # An action taken there acts in the tenant, as the staff member, audited twice.
    from tests.web.test_admin_triage import ask, confirm

    page = ask(operator.client, DEAD, "requeue_now", mine)
    assert confirm(operator.client, DEAD, page).status_code == 302
    assert row(mine.id).status == Status.PENDING
    assert row(theirs.id).status == Status.FAILED
    left = operator.client.post(SUPPORT, {"action": "leave"})
    assert left.status_code == 302 and SESSION_KEY not in operator.client.session
    assert "B&#x27;s gateway" in operator.client.get(DEAD).text, "back to normal"
    entries = list(
        AuditEntry.objects.using("admin")
        .filter(action__startswith="support.")
        .order_by("created_at")
    )
    assert {e.actor for e in entries} == {str(operator.user.pk)}
    assert {e.org_id for e in entries} == {a.org_id}
    assert {e.data["tenant"] for e in entries} == {str(a.org_id)}
    actions = [e.action for e in entries]
    # (The leave and its page share a transaction, and so the database's now().)
    assert actions[0] == "support.began" and actions.count("support.ended") == 1
    viewed = [(e.data["path"], e.data["status"]) for e in entries if e.action == "support.viewed"]
    assert (DEAD, 200) in viewed
    assert (f"{DEAD}{theirs.id}/change/", 404) in viewed
    assert [e.data["view"] for e in entries if e.action == "support.acted"].count(
        "workqueue_deadletter_changelist"
    ) == 2  # the action's choice and its confirmation
    requeued = AuditEntry.objects.using("admin").get(
        action="work.requeued", subject_id=str(mine.id)
    )
    assert (requeued.actor, requeued.org_id) == (str(operator.user.pk), a.org_id)


def test_a_viewer_in_a_support_view_stays_read_only(viewer: Person, member, worker_rctx) -> None:
    a = member()
    mine = dead_letter(a.ctx, worker_rctx)
    assert viewer.client.post(SUPPORT, {"action": "begin", "org": str(a.org_id)}).status_code == 302
    assert viewer.client.get(f"{DEAD}{mine.id}/change/").status_code == 200
    before = _snapshot()
    refused = viewer.client.post(
        DEAD, {"action": "requeue_now", "_selected_action": [str(mine.id)], "confirm": "yes"}
    )
    assert refused.status_code == 403
    assert row(mine.id).status == Status.FAILED
    # Nothing changed but the trail, which holds the refused post.
    assert _snapshot()[0] == before[0] and _snapshot()[1] == before[1] + 1
    [tried] = AuditEntry.objects.using("admin").filter(action="support.acted")
    assert (tried.actor, tried.org_id, tried.data["status"]) == (str(viewer.user.pk), a.org_id, 403)


def test_only_the_operator_and_viewers_take_a_support_view(
    member, operator: Person, worker_rctx
) -> None:
    staff = member()
    other = member()
    theirs = dead_letter(other.ctx, worker_rctx)
    assert staff.client.get(SUPPORT).status_code == 403
    begin = {"action": "begin", "org": str(other.org_id)}
    assert staff.client.post(SUPPORT, begin).status_code == 403
    # A session naming another tenant (however it got there) gives tenant staff nothing.
    session = staff.client.session
    session[SESSION_KEY] = str(other.org_id)
    session.save()
    assert staff.client.get(f"{DEAD}{theirs.id}/change/").status_code == 404
    assert not AuditEntry.objects.using("admin").filter(action__startswith="support.").exists()
    # The operator finds it from the orgs' list, the org picked already.
    orgs = operator.client.get("/admin/workqueue_tenancy/org/").text
    assert f'{SUPPORT}?org={other.org_id}"' in orgs
    picked = operator.client.get(f"{SUPPORT}?org={other.org_id}").text
    assert f'<option value="{other.org_id}" selected>' in picked
    assert "support-link" not in staff.client.get("/admin/workqueue_tenancy/org/").text
