"""An item's live endpoint (``workitem/<id>/live/``): what a running item's page keeps up to date,
read as the page is read: the operator reads any tenant's, a tenant's staff their own (another
tenant's is a 404, like one that never was); a finished item's page asks nothing."""

from __future__ import annotations

import pytest

from tests.helpers import dead_letter
from workqueue import api
from workqueue.claim import claim
from workqueue.fence import Fence
from workqueue.progress import Reported, write_progress

pytestmark = pytest.mark.usefixtures("committed")


def _live(client, item_id):  # type: ignore[no-untyped-def]
    return client.get(f"/admin/workqueue/workitem/{item_id}/live/")


def test_the_live_endpoint_reads_as_the_page_does(member, operator, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    staff, stranger = member(), member()
    item, _ = api.enqueue(staff.ctx, "NOOP", {"n": 1}, lane="live-web")
    [(_, held)] = claim(worker_rctx, "live-web", None, "w1", 300, 1)
    write_progress([Reported(Fence.of(held), '{"done": 3, "total": 4}', None)])
    answer = _live(staff.client, item.id)
    assert answer.status_code == 200 and "no-store" in answer["Cache-Control"]
    state = answer.json()
    assert (state["status"], state["attempts"], state["finished"]) == ("claimed", 1, False)
    assert state["progress_line"].startswith("3 / 4 (75%)") and state["progress_share"] == 0.75
    assert _live(operator.client, item.id).json()["status"] == "claimed"
    assert _live(stranger.client, item.id).status_code == 404
    page = staff.client.get(f"/admin/workqueue/workitem/{item.id}/change/").content.decode()
    assert f'data-live="/admin/workqueue/workitem/{item.id}/live/"' in page


def test_a_finished_items_page_asks_nothing(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    dead = dead_letter(staff.ctx, worker_rctx, {"n": 1})
    page = staff.client.get(f"/admin/workqueue/workitem/{dead.id}/change/").content.decode()
    assert "data-live=" not in page and 'id="live-status"' in page
    assert _live(staff.client, dead.id).json()["finished"] is True
