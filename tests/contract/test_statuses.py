"""Where an item stands, read from Python in one object: status, attempts, progress, the result
once done (``NOT_DONE`` before, never confused with a handler's None) and the last error."""

from __future__ import annotations

import uuid

import pytest

from tests.contract.test_progress import reported
from workqueue import api
from workqueue.exceptions import NotFound
from workqueue.fence import Fence
from workqueue.models import Status
from workqueue.progress import write_progress


def test_a_pending_item_is_not_done_and_has_no_result(face, ctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = face.enqueue(ctx, "NOOP", {})
    status = face.status_of(ctx, item.id)
    assert (status.id, status.status, status.attempts, status.progress) == (
        item.id,
        Status.PENDING,
        0,
        None,
    )
    assert status.result is api.NOT_DONE and not status.done and not status.finished
    assert status.result is not None and status.last_error == ""


def test_a_done_item_with_a_none_result_is_told_from_not_done(face, ctx, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    face.enqueue(ctx, "NOOP", {"n": 1})
    face.enqueue(ctx, "NOOP", {"n": 2})
    (item_ctx, first), (_, second) = face.claim(worker_rctx, "default", None, "w1", 30, 2)
    write_progress([reported(Fence.of(first), 3, 4, note="rows")])
    face.complete(item_ctx, first, None)
    face.complete(item_ctx, second, {"total": 7})
    done_none = face.status_of(ctx, first.id)
    assert (done_none.status, done_none.result, done_none.done, done_none.attempts) == (
        Status.DONE,
        None,
        True,
        1,
    )
    assert {k: done_none.progress[k] for k in ("done", "total", "note")} == {
        "done": 3,
        "total": 4,
        "note": "rows",
    }
    assert face.status_of(ctx, str(second.id)).result == {"total": 7}


def test_a_retried_item_shows_its_attempts_and_last_error(face, ctx, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = face.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    face.fail(item_ctx, held, "ZeroDivisionError: division by zero", delay_s=60)
    status = face.status_of(ctx, item.id)
    assert (status.status, status.attempts, status.last_error) == (
        Status.PENDING,
        1,
        "ZeroDivisionError: division by zero",
    )
    assert status.result is api.NOT_DONE


def test_another_tenants_item_is_not_found(face, ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = face.enqueue(ctx, "NOOP", {})
    with pytest.raises(NotFound):
        face.status_of(make_ctx(), item.id)
    with pytest.raises(NotFound):
        face.status_of(ctx, uuid.uuid4())
