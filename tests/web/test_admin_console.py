"""The operator's console on the items list and the workers page: search by kind, payload
field, error text and time; the bounded scan and its warning when no index serves a search;
the columns, orders and saved filters; every live worker with what it holds, its drain and its
forced stop."""

from __future__ import annotations

import re

import pytest
from django.db import connections

from audit.api import AuditEntry
from tests.helpers import dead_letter, insert_items, payload_index
from tests.web.conftest import Person
from workers.liveness import Liveness
from workers.models import Worker, WorkerState
from workqueue import api
from workqueue.admin import search
from workqueue.claim import claim
from workqueue.models import WorkItem

pytestmark = pytest.mark.usefixtures("committed")

ITEMS = "/admin/workqueue/workitem/"
WORKERS = "/admin/workqueue_workers/queuegauges/workers/"


def _shown(response) -> list[str]:  # type: ignore[no-untyped-def]
    """The item ids a list page shows, in its order."""
    return re.findall(r'name="_selected_action" value="([0-9a-f-]{36})"', response.text)


def test_a_payload_field_is_found_through_an_index_where_one_exists(
    operator: Person, member
) -> None:
    a = member()
    insert_items(a.org_id, 500)
    wanted = WorkItem.objects.using("admin").get(payload__n=7)
    with payload_index("(payload ->> 'n')"):
        page = operator.client.get(ITEMS, {"q": "payload.n=7"})
    assert _shown(page) == [str(wanted.id)]
    assert "no index serves this" not in page.text


def test_a_gin_index_serves_a_payload_field_by_containment(operator: Person, member) -> None:
    a = member()
    insert_items(a.org_id, 50)
    wanted = WorkItem.objects.using("admin").get(payload__n=3)
    with payload_index("payload jsonb_path_ops", using="gin"):
        page = operator.client.get(ITEMS, {"q": "payload.n=3"})
    assert _shown(page) == [str(wanted.id)]
    assert "no index serves this" not in page.text


def test_without_an_index_a_payload_search_reads_the_newest_items_and_says_so(
    operator: Person, member, monkeypatch
) -> None:
    a = member()
    insert_items(a.org_id, 30)
    monkeypatch.setattr(search, "SCAN_MAX", 10)
    oldest = WorkItem.objects.using("admin").get(payload__n=1)
    newest = WorkItem.objects.using("admin").get(payload__n=30)
    page = operator.client.get(ITEMS, {"q": "payload.n=1"})
    assert _shown(page) == []  # beyond the newest 10: not read
    assert "no index serves this, so only the newest 10 items were searched" in page.text
    assert 'id="scan-all"' in page.text
    assert _shown(operator.client.get(ITEMS, {"q": "payload.n=30"})) == [str(newest.id)]
    # The operator's consent: every item is read, and the page says it was a full scan.
    everything = operator.client.get(ITEMS, {"q": "payload.n=1", "scan": "all"})
    assert _shown(everything) == [str(oldest.id)]
    assert "every item was read (a full scan)" in everything.text


def test_the_search_reads_kind_prefixes_errors_workers_and_times(
    operator: Person, member, worker_rctx
) -> None:
    a = member()
    dead = dead_letter(a.ctx, worker_rctx, error="Connection refused by upstream\nmore")
    shipment, _ = api.enqueue(
        a.ctx,
        "NOTIFY_SHIPMENT",
        {"shipment_id": "00000000-0000-0000-0000-000000000001", "version": 1},
    )
    held, _ = api.enqueue(a.ctx, "NOOP", {}, lane="console-held")
    claim(worker_rctx, "console-held", ["NOOP"], "w-console", 30, 10)

    def shown(q: str, **more: str) -> set[str]:
        return set(_shown(operator.client.get(ITEMS, {"q": q, **more})))

    assert shown("kind:NOTIFY_*") == {str(shipment.id)}
    assert shown("kind:NOTIFY_SHIPMENT") == {str(shipment.id)}
    assert shown("status:failed") == {str(dead.id)}
    assert shown("status:claimed kind:NOOP") == {str(held.id)}
    assert shown('error:"connection REFUSED"') == {str(dead.id)}
    assert shown("worker:w-console") == {str(held.id)}
    assert shown("created>=1h") == {str(dead.id), str(shipment.id), str(held.id)}
    assert shown("created<1h") == set()
    assert shown("finished>=1h") == {str(dead.id)}
    assert shown("finished<1h") == set()
    assert set(_shown(operator.client.get(ITEMS, {"finished": "today"}))) == {str(dead.id)}
    assert len(_shown(operator.client.get(ITEMS, {"created": "hour"}))) == 3


def test_a_search_it_cannot_read_says_what_to_change(operator: Person, member) -> None:
    member()
    for q, said in (
        ('error:"open', "no closing quotation"),
        ("payload.a;drop=1", "a payload path is names of letters"),
        ("created>=yesterday-ish", "created: must be a timestamp"),
        ("status:sideways", "status: must be one of"),
    ):
        page = operator.client.get(ITEMS, {"q": q})
        assert page.status_code == 200, q
        assert said in page.text.lower(), q
        assert "nothing was searched" in page.text and _shown(page) == []


def test_the_list_orders_by_oldest_waiting_and_most_attempts(
    operator: Person, member, worker_rctx
) -> None:
    a = member()
    first, _ = api.enqueue(a.ctx, "NOOP", {})
    second, _ = api.enqueue(a.ctx, "NOOP", {})
    with connections["admin"].cursor() as cursor:
        # The second came due long ago: it has waited longest.
        cursor.execute(
            "UPDATE workqueue_workitem SET available_at = now() - interval '1 hour' WHERE id = %s",
            [second.id],
        )
        cursor.execute("UPDATE workqueue_workitem SET attempts = 2 WHERE id = %s", [first.id])
    dead = dead_letter(a.ctx, worker_rctx)
    with connections["admin"].cursor() as cursor:
        cursor.execute("UPDATE workqueue_workitem SET attempts = 3 WHERE id = %s", [dead.id])
    waiting = operator.client.get(ITEMS, {"sort": "waiting"})
    assert _shown(waiting) == [str(second.id), str(first.id)]
    assert "1h waiting" in waiting.text
    attempts = operator.client.get(ITEMS, {"sort": "attempts"})
    assert _shown(attempts)[:2] == [str(dead.id), str(first.id)]
    assert "Most attempts among the newest 100,000 items" in attempts.text
    every = operator.client.get(ITEMS, {"sort": "attempts", "scan": "all"})
    assert _shown(every)[:2] == [str(dead.id), str(first.id)]
    assert "Most attempts among" not in every.text


def test_the_list_shows_age_created_finished_worker_and_saved_filters(
    operator: Person, member, worker_rctx
) -> None:
    a = member()
    dead_letter(a.ctx, worker_rctx, worker="w-ran-it")
    page = operator.client.get(ITEMS).text
    for column in ("age_shown", "created", "finished", "tries", "worker"):
        assert f'class="column-{column}' in page, column
    assert "w-ran-it (last)" in page
    saved = re.search(r'<p id="saved-filters">(.*?)</p>', page, re.S)
    assert saved is not None
    for name in ("oldest-waiting", "most-attempts", "failed-today"):
        assert f'data-filter="{name}"' in saved.group(1)
    assert 'href="?status__exact=failed&amp;finished=today"' in saved.group(1)


def test_tenant_staff_search_their_tenant_only(member) -> None:
    a, b = member(), member()
    insert_items(a.org_id, 5)
    insert_items(b.org_id, 5)
    own = {str(WorkItem.objects.using("admin").get(org_id=a.org_id, payload__n=2).id)}
    assert set(_shown(a.client.get(ITEMS, {"q": "payload.n=2"}))) == own
    # Through an index too (its ids read on the system login naming A, its rows under A's
    # row-level security): B's item with the same value is not A's to see.
    with payload_index("(payload ->> 'n')"):
        page = a.client.get(ITEMS, {"q": "payload.n=2"})
        assert set(_shown(page)) == own and "no index serves this" not in page.text
    with payload_index("payload jsonb_path_ops", using="gin"):
        assert set(_shown(a.client.get(ITEMS, {"q": "payload.n=2"}))) == own
    assert 'class="column-tenant"' not in a.client.get(ITEMS).text


def _worker(worker_id: str, state: str = "running", beat_s_ago: int = 0) -> None:
    with connections["system"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO workqueue_workers_worker"
            " (id, kind, lane, host, pid, started_at, last_beat_at, state)"
            " VALUES (%s, 'NOOP,NOTIFY_SHIPMENT', 'console-lane', 'host-1', 4242, now(),"
            " now() - make_interval(secs => %s), %s)",
            [worker_id, beat_s_ago, state],
        )


def test_the_workers_page_lists_live_workers_and_what_they_hold(
    operator: Person, member, worker_rctx
) -> None:
    a = member()
    _worker("w-busy")
    _worker("w-quiet", beat_s_ago=300)
    _worker("w-gone", state="offline")
    held, _ = api.enqueue(a.ctx, "NOOP", {}, lane="console-lane")
    claim(worker_rctx, "console-lane", ["NOOP"], "w-busy", 30, 10)
    page = operator.client.get(WORKERS)
    assert page.status_code == 200
    shown = r'<tr class="worker" data-worker="([^"]+)" data-holds="(\d+)"'
    rows = dict(re.findall(shown, page.text))
    assert rows == {"w-busy": "1", "w-quiet": "0"}  # not the offline one
    assert f'href="{ITEMS}{held.id}/change/"' in page.text
    assert "host-1" in page.text and "4242" in page.text and "NOOP, NOTIFY_SHIPMENT" in page.text
    assert "(silent)" in page.text
    # A row written by a release before the column: no release to show.
    assert "<td>-</td>" in page.text
    assert "q=worker:w-busy" in page.text


def test_the_operator_drains_a_worker_audited_and_the_worker_reads_it_back(
    operator: Person,
) -> None:
    _worker("w-drain")
    liveness = Liveness("w-drain", "NOOP", "console-lane", stale_after_s=30)
    response = operator.client.post(f"{WORKERS}w-drain/drain/")
    assert response.status_code == 302
    assert Worker.objects.using("system").get(pk="w-drain").state == WorkerState.DRAINING
    entry = AuditEntry.objects.using("admin").get(action="worker.drain_requested")
    assert entry.subject_id == "w-drain" and entry.actor == str(operator.user.pk)
    # Its next beat keeps the state and reads it back: the worker then drains.
    assert liveness.publish() and liveness.drain_requested
    assert Worker.objects.using("system").get(pk="w-drain").state == WorkerState.DRAINING
    # Asked again: nothing changes, nothing more is audited.
    operator.client.post(f"{WORKERS}w-drain/drain/")
    assert AuditEntry.objects.using("admin").filter(action="worker.drain_requested").count() == 1


def test_the_operator_stops_a_draining_worker_audited_and_only_offline_ends_it(
    operator: Person,
) -> None:
    _worker("w-stop", state="draining")
    liveness = Liveness("w-stop", "NOOP", "console-lane", stale_after_s=30)
    liveness.state = "draining"
    page = operator.client.get(WORKERS)
    assert 'value="Stop now"' in page.text and "w-stop/stop/" in page.text
    assert "w-stop/drain/" not in page.text  # draining already
    response = operator.client.post(f"{WORKERS}w-stop/stop/")
    assert response.status_code == 302
    assert Worker.objects.using("system").get(pk="w-stop").state == WorkerState.STOPPING
    entry = AuditEntry.objects.using("admin").get(action="worker.stop_requested")
    assert entry.subject_id == "w-stop" and entry.actor == str(operator.user.pk)
    assert entry.data["host"] == "host-1" and entry.data["via"] == "the admin's workers page"
    # Its beats keep the state and read it back, whatever the worker publishes, until offline.
    assert liveness.publish() and liveness.stop_requested
    assert Worker.objects.using("system").get(pk="w-stop").state == WorkerState.STOPPING
    # Asked again, or asked to drain: nothing changes, nothing more is audited.
    operator.client.post(f"{WORKERS}w-stop/stop/")
    operator.client.post(f"{WORKERS}w-stop/drain/")
    assert AuditEntry.objects.using("admin").filter(action__startswith="worker.").count() == 1
    liveness.state = "offline"
    assert liveness.publish()
    assert Worker.objects.using("system").get(pk="w-stop").state == WorkerState.OFFLINE


def test_a_worker_not_asked_publishes_as_before(committed) -> None:
    liveness = Liveness("w-plain", "NOOP", "default", stale_after_s=30)
    assert liveness.publish() and not (liveness.drain_requested or liveness.stop_requested)
    # Its row says which release it runs ("dev": the site names none), as the page shows.
    assert Worker.objects.using("system").get(pk="w-plain").version == "dev"
    liveness.state = "draining"
    assert liveness.publish() and not liveness.drain_requested


def test_only_the_operator_sees_the_workers_page_and_drains(member) -> None:
    _worker("w-fenced")
    staff = member()
    assert staff.client.get(WORKERS).status_code == 403
    assert staff.client.post(f"{WORKERS}w-fenced/drain/").status_code == 403
    assert staff.client.post(f"{WORKERS}w-fenced/stop/").status_code == 403
    assert Worker.objects.using("system").get(pk="w-fenced").state == WorkerState.RUNNING
