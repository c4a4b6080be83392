"""Rate limits in the admin (operators only) and on the gauges page; every change audited."""

from __future__ import annotations

import pytest

from audit.models import AuditEntry
from tests.web.conftest import Person
from workqueue.claim import forget_rate_limits
from workqueue.models import RateLimit
from workqueue.pauses import SITE_ORG_ID
from workqueue.rate_limits import set_rate_limit

pytestmark = pytest.mark.usefixtures("committed")

LIST = "/admin/workqueue/ratelimit/"
ADD = "/admin/workqueue/ratelimit/add/"
GAUGES = "/admin/workqueue_workers/queuegauges/"


@pytest.fixture(autouse=True)
def _forget() -> None:
    forget_rate_limits()


def test_the_operator_sets_and_clears_a_limit_in_the_admin(operator: Person) -> None:
    form = {"scope": "key", "target": "acct-1", "rate": "600/m", "burst": "20"}
    answer = operator.client.post(ADD, form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    limit = RateLimit.objects.using("admin").get()
    assert (limit.count, limit.period_s, limit.burst) == (600, 60, 20)
    listing = operator.client.get(LIST).content.decode()
    assert f'<td class="field-set_by_name">{operator.user.get_username()}</td>' in listing
    answer = operator.client.post(
        LIST, {"action": "clear_selected", "_selected_action": [str(limit.pk)]}
    )
    assert answer.status_code == 302
    assert not RateLimit.objects.using("admin").exists()
    entries = AuditEntry.objects.using("admin").filter(org_id=SITE_ORG_ID)
    assert [e.action for e in entries.order_by("created_at", "action")] == [
        "queue.rate_limit_set",
        "queue.rate_limit_cleared",
    ]


def test_a_bad_rate_is_refused_by_name_and_nothing_stored(operator: Person) -> None:
    answer = operator.client.post(ADD, {"scope": "key", "target": "k", "rate": "10 a second"})
    assert answer.status_code == 200
    assert "give N/s, N/m, N/h or N/d" in answer.content.decode()
    assert not RateLimit.objects.using("admin").exists()


def test_a_tenants_staff_can_neither_see_nor_set_limits(member) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    assert staff.client.get(LIST).status_code == 403
    assert staff.client.post(ADD, {"scope": "key", "target": "k", "rate": "1/s"}).status_code == 403
    assert not RateLimit.objects.using("admin").exists()


def test_the_gauges_page_shows_the_limits(operator: Person) -> None:
    assert 'id="rate-limits-none"' in operator.client.get(GAUGES).content.decode()
    set_rate_limit("operator-42", "kind", "NOOP", "10/s")
    page = operator.client.get(GAUGES).content.decode()
    assert 'id="rate-limits"' in page and "10/s" in page and "operator-42" in page
    set_rate_limit(str(operator.user.pk), "kind", "NOOP", "5/s")
    page = operator.client.get(GAUGES).content.decode()
    assert f"<td>{operator.user.get_username()}</td>" in page  # a user by name, not by id
