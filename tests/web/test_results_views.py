"""An item's result where people read it: ``GET /api/work/<id>`` (its tenant only) and the
admin's item page (read-only, indented JSON)."""

from __future__ import annotations

import html
import re

import pytest

from tests.web.conftest import Person
from workqueue import api
from workqueue.claim import claim
from workqueue.settle import complete

pytestmark = pytest.mark.usefixtures("committed")

RESULT = {"invoice": "INV-7", "total": 12.5, "lines": ["a", "b"], "note": "<b>ok</b>"}


def _done(person: Person, worker_rctx, result: object) -> api.WorkItem:  # type: ignore[no-untyped-def]
    assert person.ctx is not None
    api.enqueue(person.ctx, "NOOP", {}, lane="results-page")
    [(item_ctx, held)] = claim(worker_rctx, "results-page", None, "w1", 30, 1)
    return complete(item_ctx, held, result)


def test_the_api_shows_the_result_to_its_tenant_only(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    alice = member(role="member", staff=False)
    done = _done(alice, worker_rctx, RESULT)
    body = alice.client.get(f"/api/work/{done.id}").json()["item"]
    assert (body["status"], body["result"]) == ("done", RESULT)
    pending, _ = api.enqueue(alice.ctx, "NOOP", {})
    assert alice.client.get(f"/api/work/{pending.id}").json()["item"]["result"] is None
    stranger = member(role="owner", staff=False)
    assert stranger.client.get(f"/api/work/{done.id}").status_code == 404


@pytest.mark.parametrize("who", ["operator", "staff"])
def test_the_items_page_shows_the_result_indented_and_escaped(  # type: ignore[no-untyped-def]
    who: str, operator: Person, member, worker_rctx
) -> None:
    owner = member(role="admin", staff=True)
    done = _done(owner, worker_rctx, RESULT)
    person = operator if who == "operator" else owner
    page = person.client.get(f"/admin/workqueue/workitem/{done.id}/change/").text
    section = re.search(r'<div class="wq-section" id="result">(.*?)</div>', page, re.S)
    assert section, "no result section"
    assert "&lt;b&gt;ok&lt;/b&gt;" in section.group(1)  # escaped, never markup
    shown = re.search(r"<pre>(.*?)</pre>", section.group(1), re.S)
    assert shown and html.unescape(shown.group(1)).startswith('{\n  "invoice": "INV-7",')
    assert '"note": "<b>ok</b>"' in html.unescape(shown.group(1))


def test_the_items_page_says_when_there_is_none(member, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    owner = member(role="admin", staff=True)
    done = _done(owner, worker_rctx, None)
    page = owner.client.get(f"/admin/workqueue/workitem/{done.id}/change/").text
    assert "None: its handler returned nothing." in page
    pending, _ = api.enqueue(owner.ctx, "NOOP", {})
    page = owner.client.get(f"/admin/workqueue/workitem/{pending.id}/change/").text
    assert "None yet: a result is stored when the item is done." in page
