"""A triage action is one registered class: the lists offer it, an item's page shows its
button, its confirmation page asks for its form's fields and refuses a bad value, and it acts,
with nothing else written for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django import forms
from django.core.exceptions import ImproperlyConfigured

from audit.models import AuditEntry
from tenancy.contexts import OpContext
from tests.helpers import dead_letter, row
from tests.web.conftest import Person
from tests.web.test_admin_triage import ask, confirm
from workqueue.admin.actions import TRIAGE_ACTIONS, TriageAction, triage_action
from workqueue.models import Status
from workqueue.triage import Drawn, Triaged, requeue_dead
from workqueue.triage.drawn import REQUEUEABLE

pytestmark = pytest.mark.usefixtures("committed")

DEAD = "/admin/workqueue/deadletter/"
ITEMS = "/admin/workqueue/workitem/"


class HoursForm(forms.Form):
    hours = forms.IntegerField(label="Hours", min_value=1, max_value=48)


class RequeueInHours(TriageAction):
    name, label, verb = "requeue_in_hours", "Requeue in a few hours", "Requeue in hours"
    says = "They wait the hours given, then run again."
    acts_on = REQUEUEABLE
    form = HoursForm

    def act(self, ctx: OpContext, fences: list[Drawn], inputs: dict[str, Any]) -> Triaged:
        return requeue_dead(ctx, fences, delay_s=inputs["hours"] * 3600)


@pytest.fixture
def registered() -> Iterator[None]:
    triage_action(RequeueInHours)
    try:
        yield
    finally:
        TRIAGE_ACTIONS.pop(RequeueInHours.name)


@pytest.mark.usefixtures("registered")
def test_a_new_action_is_offered_asks_its_fields_and_acts(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    staff: Person = member()
    dead = dead_letter(staff.ctx, worker_rctx)
    for url in (DEAD, ITEMS):
        listed = staff.client.get(url).text
        assert '<option value="requeue_in_hours">Requeue in a few hours</option>' in listed
    detail = staff.client.get(f"{DEAD}{dead.id}/change/").text
    assert 'value="requeue_in_hours"' in detail
    page = ask(staff.client, DEAD, "requeue_in_hours", dead)
    assert "Requeue in hours: confirm" in page.text and 'name="hours"' in page.text
    assert "They wait the hours given, then run again." in page.text
    refused = confirm(staff.client, DEAD, page, hours="99")
    assert refused.status_code == 200
    assert "hours: Ensure this value is less than or equal to 48." in refused.text
    assert row(dead.id).status == Status.FAILED
    confirm(staff.client, DEAD, page, hours="2")
    assert row(dead.id).status == Status.PENDING
    [entry] = AuditEntry.objects.using("admin").filter(
        subject_id=str(dead.id), action="work.requeued"
    )
    assert entry.data["delay_s"] == 7200


def test_a_name_is_registered_once() -> None:
    class Again(RequeueInHours):
        name = "discard"

    with pytest.raises(ImproperlyConfigured, match="a name of its own"):
        triage_action(Again)
    assert type(TRIAGE_ACTIONS["discard"]).__name__ == "Discard"
