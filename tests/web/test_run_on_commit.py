"""The reference site while developing, with ``WORKQUEUE["RUN_ON_COMMIT"]`` and no worker: an
item the API enqueued has run by the time the request's transaction has committed."""

from __future__ import annotations

import json

import pytest

from tests.web.conftest import Person

pytestmark = pytest.mark.usefixtures("committed", "run_on_commit")


def test_the_apis_item_has_run_when_its_answer_arrives(member) -> None:  # type: ignore[no-untyped-def]
    alice: Person = member(staff=False)
    posted = alice.client.post(
        "/api/work/", json.dumps({"kind": "NOOP", "payload": {}}), content_type="application/json"
    )
    assert posted.status_code == 201, posted.content
    # The answer was written inside the request's transaction: the item as enqueued.
    item = posted.json()["item"]
    assert item["status"] == "pending"
    shown = alice.client.get(f"/api/work/{item['id']}").json()["item"]
    assert (shown["status"], shown["attempts"]) == ("done", 1)
