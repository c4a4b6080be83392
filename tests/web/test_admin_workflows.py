"""A workflow's page in the admin: reached from its items, its steps page by page, what holds it
up (a dead step, linked to its triage, also named on the dead letters' list), its callbacks, its
confirmed and audited cancel; another tenant's workflow is a 404 for a tenant's staff, and the
operator sees every tenant's."""

from __future__ import annotations

import re
import uuid

import pytest

from audit.models import AuditEntry
from tests.helpers import row
from tests.web.conftest import Person
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Status
from workqueue.settle import complete, fail
from workqueue.workflows import Workflow

pytestmark = pytest.mark.usefixtures("committed")

ITEMS = "/admin/workqueue/workitem/"
DEAD = "/admin/workqueue/deadletter/"


def page_of(workflow_id: uuid.UUID) -> str:
    return f"{ITEMS}workflow/{workflow_id}/"


def noop(n: int, lane: str = "default") -> api.NewItem:
    return api.NewItem("NOOP", {"n": n}, lane=lane)


def run_one(rctx, lane: str, error: str | None = None):  # type: ignore[no-untyped-def]
    [(item_ctx, held)] = claim(rctx, lane, ["NOOP"], "w1", 30, 1)
    if error is None:
        return complete(item_ctx, held, {"n": held.payload["n"]})
    return fail(item_ctx, held, error, permanent=True)


def stuck_group(ctx, rctx, lane: str = "wf-members"):  # type: ignore[no-untyped-def]
    """A group of three with both callbacks: two members done, one dead (holding on_success)."""
    wf = Workflow()
    group = wf.group([noop(n, lane) for n in (1, 2, 3)], on_success=noop(10), on_complete=noop(11))
    declared = api.enqueue_workflow(ctx, wf)
    run_one(rctx, lane)
    run_one(rctx, lane)
    dead = run_one(rctx, lane, error="PermanentError: the gateway said no")
    return declared, group, dead


@pytest.fixture
def staff(member) -> Person:  # type: ignore[no-untyped-def]
    return member()


def test_the_workflow_page_shows_steps_counts_callbacks_and_the_dead_step(
    staff: Person, worker_rctx
) -> None:
    declared, group, dead = stuck_group(staff.ctx, worker_rctx)
    # Reached from any of its items: the list's column, and each item's page.
    assert page_of(declared.workflow_id) in staff.client.get(ITEMS).text
    item_page = staff.client.get(f"{ITEMS}{declared[group.on_success]}/change/")
    assert item_page.status_code == 200
    assert page_of(declared.workflow_id) in item_page.text
    assert "It waits for 1 more" in item_page.text
    page = staff.client.get(page_of(declared.workflow_id))
    assert page.status_code == 200
    text = page.text
    assert "5 steps" in text
    for status, n in (("done", 2), ("failed", 1), ("waiting", 1), ("pending", 1)):
        assert re.search(rf'class="count-{status}"><span class="n">{n}</span>', text), status
    assert text.count('class="step step-') == 5
    # What holds it up: the dead member, one step waiting on it, linked to its triage page.
    blockers = text[text.index('id="blockers"') : text.index('id="callbacks"')]
    assert "steps[2]" in blockers and "is dead" in blockers
    assert "<strong>1</strong> step waits on it" in blockers
    assert f"{DEAD}{dead.id}/change/" in blockers
    # The callbacks: on_complete fired, on_success waits for the dead member.
    callbacks = text[text.index('id="callbacks"') : text.index('id="steps-section"')]
    assert re.search(r"callback-on_complete.*?<td class=\"fired\">yes", callbacks, re.S)
    assert re.search(r"callback-on_success.*?not yet: 1 of its items", callbacks, re.S)
    # The dead letter's page and its list name the workflow it holds up.
    dead_page = staff.client.get(f"{DEAD}{dead.id}/change/")
    assert 'id="holding"' in dead_page.text and page_of(declared.workflow_id) in dead_page.text
    listed = staff.client.get(DEAD)
    assert page_of(declared.workflow_id) in listed.text
    assert '<span class="holds">1 waiting</span>' in listed.text


def test_steps_are_read_page_by_page(staff: Person, worker_rctx) -> None:
    wf = Workflow()
    wf.group([noop(n, "wf-parked") for n in range(120)], on_success=noop(999))
    declared = api.enqueue_workflow(staff.ctx, wf)
    seen: list[str] = []
    url, pages = page_of(declared.workflow_id), 0
    while url:
        page = staff.client.get(url)
        assert page.status_code == 200
        seen += re.findall(r'id="step-([0-9a-f-]{36})"', page.text)
        pages += 1
        following = re.search(r'href="\?after=([0-9a-f-]{36})" id="next-page"', page.text)
        url = f"{page_of(declared.workflow_id)}?after={following.group(1)}" if following else ""
    assert pages == 3
    assert seen == sorted(str(i) for i in declared.ids)
    # Each page says the counts of the whole workflow.
    assert re.search(r'class="count-pending"><span class="n">120</span>', page.text)
    assert "121 steps" in page.text
    # The callback names how many it waits for, beyond the five a page shows.
    assert "… 120 in all" in page.text
    bad = staff.client.get(f"{page_of(declared.workflow_id)}?after=not-an-id")
    assert bad.status_code == 404


def test_another_tenants_workflow_is_not_there_for_staff(
    staff: Person, member, operator: Person, worker_rctx
) -> None:
    declared, _, dead = stuck_group(staff.ctx, worker_rctx)
    other = member()
    assert other.client.get(page_of(declared.workflow_id)).status_code == 404
    assert other.client.get(f"{page_of(declared.workflow_id)}cancel/").status_code == 404
    assert (
        other.client.post(f"{page_of(declared.workflow_id)}cancel/", {"confirm": "yes"}).status_code
        == 404
    )
    assert {row(i).status for i in declared.ids} != {Status.CANCELLED}
    # An item's id that is not a workflow's first step is no workflow either.
    assert staff.client.get(page_of(dead.id)).status_code == 404
    assert staff.client.get(page_of(uuid.uuid4())).status_code == 404
    # The operator sees every tenant's, and the dead letters' list names it for them too.
    seen = operator.client.get(page_of(declared.workflow_id))
    assert seen.status_code == 200 and "5 steps" in seen.text
    assert page_of(declared.workflow_id) in operator.client.get(DEAD).text
    # The other tenant's staff see no trace of it on their dead letters' list.
    assert page_of(declared.workflow_id) not in other.client.get(DEAD).text
    # The operator cancels it in its tenant, audited as themselves.
    done = operator.client.post(f"{page_of(declared.workflow_id)}cancel/", {"confirm": "yes"})
    assert done.status_code == 302
    entries = AuditEntry.objects.using("admin").filter(action="work.cancelled")
    assert entries.count() == 2
    assert {(e.actor, e.org_id) for e in entries} == {(str(operator.user.pk), staff.org_id)}
    assert {e.data["reason"] for e in entries} == {"workflow cancelled in the admin"}


def test_cancel_the_workflow_asks_first_then_cancels_and_audits(staff: Person, worker_rctx) -> None:
    declared, group, _ = stuck_group(staff.ctx, worker_rctx)
    page = staff.client.get(page_of(declared.workflow_id))
    assert 'id="cancel-workflow"' in page.text
    confirm = staff.client.get(f"{page_of(declared.workflow_id)}cancel/")
    assert confirm.status_code == 200 and "delete-confirmation" in confirm.text
    assert "<strong>1</strong> waiting, <strong>1</strong> pending" in confirm.text
    assert row(declared[group.on_success]).status == Status.WAITING, "the page changes nothing"
    done = staff.client.post(
        f"{page_of(declared.workflow_id)}cancel/", {"confirm": "yes", "reason": "bad batch"}
    )
    assert done.status_code == 302 and done["Location"] == page_of(declared.workflow_id)
    for callback in (group.on_success, group.on_complete):
        item = row(declared[callback])
        assert item.status == Status.CANCELLED and item.last_error == "bad batch"
    entries = AuditEntry.objects.using("admin").filter(action="work.cancelled")
    assert sorted(e.subject_id for e in entries) == sorted(
        str(declared[c]) for c in (group.on_success, group.on_complete)
    )
    assert {e.actor for e in entries} == {str(staff.user.pk)}
    assert {e.data["reason"] for e in entries} == {"bad batch"}
    after = staff.client.get(page_of(declared.workflow_id))
    assert 'id="cancel-workflow"' not in after.text  # nothing left to cancel


def test_a_member_who_is_not_staff_gets_no_workflow_page(member, worker_rctx) -> None:
    plain = member(staff=False)
    wf = Workflow()
    wf.chain(noop(1), noop(2))
    declared = api.enqueue_workflow(plain.ctx, wf)
    response = plain.client.get(page_of(declared.workflow_id))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
