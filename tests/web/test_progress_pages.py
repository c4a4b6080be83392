"""An item's progress and metadata where people read them: ``GET /api/work/<id>``, the admin's
item list (a compact column) and its page (a bar, the numbers, the note, the metadata)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import row
from tests.web.conftest import Person
from workqueue import api
from workqueue.claim import claim
from workqueue.fence import Fence
from workqueue.models import WorkItem
from workqueue.progress import Report, Reported, write_progress
from workqueue.settle import complete

pytestmark = pytest.mark.usefixtures("committed")

ITEMS = "/admin/workqueue/workitem/"


def reported_item(person: Person, worker_rctx: Any, *progress: Any, note: str = "", **meta: Any):  # type: ignore[no-untyped-def]
    """An item of ``person``'s tenant, claimed, its report written as the worker writes it."""
    assert person.ctx is not None
    item, _ = api.enqueue(person.ctx, "NOOP", {})
    [(_, held)] = claim(worker_rctx, "default", None, "w1", 30, 1)
    assert held.id == item.id
    report = Report()
    report.progress(*progress, note)
    if meta:
        report.merge_meta(meta)
    taken = report.take()
    assert taken is not None
    assert write_progress([Reported.of(Fence.of(held), taken)]) == {held.id}
    return held


def test_the_api_shows_progress_and_metadata_kept_after_the_item_ends(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    alice = member(role="member", staff=False)
    held = reported_item(alice, worker_rctx, 450, 1000, note="rows", file="a.csv")
    complete(alice.ctx, held)
    shown = alice.client.get(f"/api/work/{held.id}").json()["item"]
    assert shown["status"] == "done"
    assert {k: shown["progress"][k] for k in ("done", "total", "note")} == {
        "done": 450,
        "total": 1000,
        "note": "rows",
    }
    assert shown["progress"]["at"] == row(held.id).progress["at"]
    assert shown["meta"] == {"file": "a.csv"}
    fresh, _ = api.enqueue(alice.ctx, "NOOP", {})
    shown = alice.client.get(f"/api/work/{fresh.id}").json()["item"]
    assert (shown["progress"], shown["meta"]) == (None, {})


def test_the_admin_shows_progress_in_the_list_and_on_the_item_page(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    staff = member()
    held = reported_item(staff, worker_rctx, 450, 1000, note="importing rows", file="a.csv")
    unknown_total = reported_item(staff, worker_rctx, 1234567, None, note="")
    waiting, _ = api.enqueue(staff.ctx, "NOOP", {})

    listed = staff.client.get(ITEMS).content.decode()
    assert "450 / 1,000 (45%) importing rows" in listed
    assert "1,234,567" in listed

    page = staff.client.get(f"{ITEMS}{held.id}/change/").content.decode()
    assert 'id="progress"' in page
    assert '<progress max="1" value="0.450000">' in page
    assert "450 / 1,000 (45%) importing rows" in page
    assert "&quot;file&quot;: &quot;a.csv&quot;" in page

    page = staff.client.get(f"{ITEMS}{unknown_total.id}/change/").content.decode()
    # No total: no bar shown (it is there, hidden, for the page's live updates to fill).
    assert "1,234,567" in page and '<progress max="1" value="" hidden>' in page

    page = staff.client.get(f"{ITEMS}{waiting.id}/change/").content.decode()
    assert "None reported yet." in page
    assert WorkItem.objects.using("admin").get(pk=waiting.id).progress is None
