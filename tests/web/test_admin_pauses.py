"""Pausing and resuming lanes: the admin's (operators only), ``manage.py queue pause|resume|
paused``, the gauges page and ``/metrics``; every change audited with the actor."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from tenancy.contexts import SYSTEM_ACTOR
from tests.web.conftest import Person
from workers.gauges import CachedGauges, QueueCollector
from workqueue import pauses as lane_pauses
from workqueue.models import Pause
from workqueue.pauses import SITE_ORG_ID

pytestmark = pytest.mark.usefixtures("committed")

LIST = "/admin/workqueue/pause/"
ADD = "/admin/workqueue/pause/add/"
GAUGES = "/admin/workqueue_workers/queuegauges/"


def _audit() -> list[tuple[str, str, str]]:
    entries = AuditEntry.objects.using("admin").filter(org_id=SITE_ORG_ID)
    return [(e.action, e.actor, e.subject_id) for e in entries.order_by("created_at", "action")]


def test_the_operator_pauses_and_resumes_a_lane_in_the_admin(operator: Person) -> None:
    answer = operator.client.post(ADD, {"lane": "default", "kind": "NOOP", "reason": "deploy"})
    assert answer.status_code == 302, answer.content.decode()[:2000]
    pause = Pause.objects.using("admin").get()
    assert (pause.lane, pause.kind, pause.paused_by) == ("default", "NOOP", str(operator.user.pk))
    listing = operator.client.get(LIST).content.decode()
    assert "default:NOOP" in listing and "deploy" in listing
    assert f'<td class="field-paused_by_name">{operator.user.get_username()}</td>' in listing
    answer = operator.client.post(
        LIST, {"action": "resume_selected", "_selected_action": [str(pause.pk)]}
    )
    assert answer.status_code == 302
    assert not Pause.objects.using("admin").exists()
    actor = str(operator.user.pk)
    assert _audit() == [
        ("queue.paused", actor, "default:NOOP"),
        ("queue.resumed", actor, "default:NOOP"),
    ]


def test_pausing_a_paused_lane_again_changes_nothing(operator: Person) -> None:
    lane_pauses.pause("someone", "default")
    answer = operator.client.post(ADD, {"lane": "default", "kind": ""}, follow=True)
    assert "was already paused by someone" in answer.content.decode()
    assert Pause.objects.using("admin").get().paused_by == "someone"
    assert [a for a, _, _ in _audit()] == ["queue.paused"]


def test_a_tenants_staff_can_neither_see_nor_pause_lanes(member) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    lane_pauses.pause("operator", "default")
    assert staff.client.get(LIST).status_code == 403
    assert staff.client.post(ADD, {"lane": "default", "kind": "NOOP"}).status_code == 403
    pause = Pause.objects.using("admin").get()
    answer = staff.client.post(
        LIST, {"action": "resume_selected", "_selected_action": [str(pause.pk)]}
    )
    assert answer.status_code == 403
    assert Pause.objects.using("admin").filter(kind="").exists()  # still paused
    assert [a for a, _, _ in _audit()] == ["queue.paused"]


def test_the_gauges_page_shows_what_is_paused(operator: Person, member) -> None:  # type: ignore[no-untyped-def]
    assert 'id="pauses-none"' in operator.client.get(GAUGES).content.decode()
    lane_pauses.pause("operator-42", "default", "NOOP", reason="vendor down")
    page = operator.client.get(GAUGES).content.decode()
    assert 'id="pauses"' in page and "operator-42" in page and "vendor down" in page
    staff_page = member().client.get(GAUGES).content.decode()
    assert 'id="pauses"' in staff_page and "NOOP" in staff_page
    assert "operator-42" not in staff_page  # who paused it: the operator's page only
    lane_pauses.pause(str(operator.user.pk), "default", "", reason="all")
    page = operator.client.get(GAUGES).content.decode()
    assert f"<td>{operator.user.get_username()}</td>" in page  # a user by name, not by id


def test_metrics_carry_a_gauge_per_paused_lane_and_kind(committed) -> None:
    lane_pauses.pause("operator", "default", "NOOP")
    families = {f.name: f for f in QueueCollector(CachedGauges(cache_s=0)).collect()}
    samples = {
        (s.labels["lane"], s.labels["kind"]): s.value
        for s in families["workqueue_lane_paused"].samples
    }
    assert samples[("default", "NOOP")] == 1
    assert samples[("default", "")] == 0


# -- manage.py queue ----------------------------------------------------------------------------


def _queue(*args: str) -> str:
    out = StringIO()
    call_command("queue", *args, stdout=out)
    return out.getvalue()


def test_manage_py_pauses_lists_and_resumes_as_the_operator(operator: Person) -> None:
    name = operator.user.get_username()
    assert "paused default:NOOP" in _queue("pause", "default:NOOP", "--user", name, "--reason", "x")
    assert "already paused" in _queue("pause", "default:NOOP")
    listing = _queue("paused")
    assert listing.startswith(f"default:NOOP\tpaused by {name} at "), listing  # not the id
    assert "resumed default:NOOP" in _queue("resume", "default:NOOP", "--user", name)
    assert "was not paused" in _queue("resume", "default:NOOP")
    assert _queue("paused").strip() == "nothing is paused"
    actor = str(operator.user.pk)
    assert _audit() == [
        ("queue.paused", actor, "default:NOOP"),
        ("queue.resumed", actor, "default:NOOP"),
    ]


def test_manage_py_pause_without_a_user_is_signed_by_the_system(committed) -> None:
    _queue("pause", "default")
    assert _audit() == [("queue.paused", SYSTEM_ACTOR, "default")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("pause", "nowhere"), "lane: 'nowhere' is not declared"),
        (("pause", "default:NO_SUCH"), "kind: unknown work kind"),
        (("pause", "default:"), "names no kind"),
        (("resume", "bad lane"), "lane:"),
    ],
)
def test_manage_py_refuses_a_bad_target(committed, args, message) -> None:
    with pytest.raises(CommandError, match=message):
        _queue(*args)
    assert not Pause.objects.using("admin").exists()


def test_manage_py_refuses_a_user_who_is_not_the_operator(member) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    with pytest.raises(CommandError, match="is not an active superuser"):
        _queue("pause", "default", "--user", staff.user.get_username())
    assert not Pause.objects.using("admin").exists()
