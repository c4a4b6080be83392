"""Progress and metadata on real PostgreSQL: the write is fenced by the claim token, replaces
the progress, merges the metadata, and leaves the item's state alone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from tests.contract.conftest import _once
from tests.helpers import row
from workqueue.fence import Fence
from workqueue.metrics import STALE_WRITES
from workqueue.models import Status
from workqueue.progress import Report, Reported, write_progress


@pytest.fixture(params=["sync", "async"])
def write(request: pytest.FixtureRequest) -> Callable[[Iterable[Reported]], set[uuid.UUID]]:
    """``write_progress`` on the sync face, or its async twin run on a fresh loop."""
    if request.param == "sync":
        return write_progress
    return lambda reports: asyncio.run(_once(write_progress.aio, list(reports)))


def reported(fence: Fence, *progress: Any, note: str = "", meta: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    """A report as the worker sends it, made the way a run records it."""
    report = Report()
    if progress:
        report.progress(*progress, note)
    if meta is not None:
        report.merge_meta(meta)
    taken = report.take()
    assert taken is not None
    return Reported.of(fence, taken)


def refused() -> float:
    return STALE_WRITES.labels("write_progress")._value.get()


def test_a_new_item_has_no_progress_and_empty_metadata(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    assert (item.progress, item.meta) == (None, {})
    [(_, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert (held.progress, held.meta) == (None, {})
    assert (row(item.id).progress, row(item.id).meta) == (None, {})


def test_the_holder_writes_progress_and_merges_metadata(write, face, ctx, make_ctx, worker_rctx):  # type: ignore[no-untyped-def]
    other = make_ctx()
    face.enqueue(ctx, "NOOP", {})
    face.enqueue(other, "NOOP", {})
    held = [item for _, item in face.claim(worker_rctx, "default", None, "w1", 30, 10)]
    before = {item.id: row(item.id).updated_at for item in held}
    first, second = (Fence.of(item) for item in held)
    written = write(
        [
            reported(first, 450, 1000, note="rows", meta={"file": "a.csv", "rows": 1000}),
            reported(second, 3, None),
        ]
    )
    assert written == {first.item_id, second.item_id}
    stored = row(first.item_id)
    assert {k: stored.progress[k] for k in ("done", "total", "note")} == {
        "done": 450,
        "total": 1000,
        "note": "rows",
    }
    assert stored.progress["at"]  # the database's clock
    assert stored.meta == {"file": "a.csv", "rows": 1000}
    assert row(second.item_id).progress["total"] is None
    # Metadata only: the progress stays, the metadata merges key by key.
    assert write([reported(first, meta={"rows": 999, "skipped": [1, 2]})]) == {first.item_id}
    stored = row(first.item_id)
    assert stored.progress["done"] == 450
    assert stored.meta == {"file": "a.csv", "rows": 999, "skipped": [1, 2]}
    # A report is not a transition: the item's state and its updated_at are untouched.
    assert stored.status == Status.CLAIMED and stored.updated_at == before[first.item_id]


def test_a_stale_holders_write_is_refused_and_counted(write, face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    face.enqueue(ctx, "NOOP", {})
    lost, kept = (item for _, item in face.claim(worker_rctx, "default", None, "w1", 30, 2))
    face.release(ctx, lost, "lost to another holder")
    [(_, again)] = face.claim(worker_rctx, "default", None, "w2", 30, 1)
    assert again.id == lost.id  # claimed again, under a new token
    counted = refused()
    written = write(
        [
            reported(Fence.of(lost), 9, 10, meta={"who": "stale"}),  # the old token
            reported(Fence(uuid.uuid4(), kept.id, kept.claim_token), 9, 10),  # another tenant
            reported(Fence.of(kept), 1, 10),
        ]
    )
    assert written == {kept.id}
    assert refused() == counted + 1  # per item refused: the kept item was written
    stored = row(lost.id)
    assert (stored.progress, stored.meta) == (None, {})
    assert row(kept.id).progress["done"] == 1


def test_an_ended_item_takes_no_more_reports_and_keeps_its_last(write, face, ctx, worker_rctx):  # type: ignore[no-untyped-def]
    face.enqueue(ctx, "NOOP", {})
    [(_, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    fence = Fence.of(held)
    assert write([reported(fence, 10, 10, note="all", meta={"ok": True})]) == {held.id}
    face.complete(ctx, held)
    assert write([reported(fence, 11, 11)]) == set()
    stored = row(held.id)
    assert (stored.status, stored.progress["done"], stored.meta) == (Status.DONE, 10, {"ok": True})


def test_an_id_given_twice_takes_the_values_of_the_fence_that_holds_it(
    write, face, ctx, worker_rctx
):  # type: ignore[no-untyped-def]
    face.enqueue(ctx, "NOOP", {})
    [(_, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    stale = Fence(held.org_id, held.id, uuid.uuid4())
    written = write([reported(stale, 1, 2, note="stale"), reported(Fence.of(held), 2, 2)])
    assert written == {held.id}
    assert (row(held.id).progress["done"], row(held.id).progress["note"]) == (2, "")
