"""Results: what a handler returned is stored by the statement that completes its item, under
its claim token, and read back by id in its tenant (one statement for many); what cannot be
stored is refused before anything is written."""

from __future__ import annotations

import math
import uuid

import pytest
from django.db import connections

from tests.helpers import queue_settings, row, statements
from workqueue import api
from workqueue.exceptions import InvalidPayload, NotFound, UnstorableResult
from workqueue.fence import Fence
from workqueue.models import Status
from workqueue.results import READ_MAX, READ_RESULTS, result_json
from workqueue.settle import COMPLETE_MANY, complete, complete_many


def _held(face, ctx, worker_rctx, n: int = 1, lane: str = "results"):  # type: ignore[no-untyped-def]
    for i in range(n):
        face.enqueue(ctx, "NOOP", {"n": i}, lane=lane)
    return face.claim(worker_rctx, lane, None, "w1", 30, n)


# -- stored with the completion, under the claim token -------------------------------------------


@pytest.mark.parametrize(
    "value", [{"total": 3, "ids": ["a", "b"]}, "hello", "123", 0, False, [1, 2.5, None]]
)
def test_complete_stores_the_result_and_it_reads_back_as_returned(
    face, ctx, worker_rctx, value: object
) -> None:
    [(item_ctx, held)] = _held(face, ctx, worker_rctx)
    done = face.complete(item_ctx, held, value)
    assert (done.status, done.result) == (Status.DONE, value)
    assert row(held.id).result == value
    assert face.result_of(ctx, held.id) == value
    assert face.results_of(ctx, [str(held.id)]) == {held.id: value}


def test_none_stores_no_result(face, ctx, worker_rctx) -> None:
    (item_ctx, first), (_, second) = _held(face, ctx, worker_rctx, 2)
    face.complete(item_ctx, first)
    face.complete_many([Fence.of(second)], [None])
    assert row(first.id).result is None and row(second.id).result is None
    assert face.results_of(ctx, [first.id, second.id]) == {first.id: None, second.id: None}


def test_complete_many_stores_each_result_at_its_own_place(face, ctx, worker_rctx) -> None:
    held = [item for _, item in _held(face, ctx, worker_rctx, 3)]
    texts = [result_json({"n": 0}), None, result_json("two")]
    assert face.complete_many([Fence.of(item) for item in held], texts) == {i.id for i in held}
    assert [row(item.id).result for item in held] == [{"n": 0}, None, "two"]


def test_a_stale_completion_writes_no_result(face, ctx, worker_rctx) -> None:
    """A fence of an earlier claim (the same id, another token) writes nothing, wherever it
    stands in the batch: the result stored is the live holder's."""
    (item_ctx, first), (_, second) = _held(face, ctx, worker_rctx, 2)
    stale = Fence(first.org_id, first.id, uuid.uuid4())
    live = Fence.of(first)
    done = face.complete_many([stale, live], [result_json("stale"), result_json("live")])
    assert done == {first.id} and row(first.id).result == "live"
    assert face.complete_many([Fence(second.org_id, second.id, uuid.uuid4())], ['"x"']) == set()
    assert (row(second.id).status, row(second.id).result) == (Status.CLAIMED, None)
    with pytest.raises(api.Conflict):
        face.complete(item_ctx, first, {"again": True})  # done already: its token is spent
    assert row(first.id).result == "live"


def test_a_batch_without_results_sends_no_array(ctx, worker_rctx) -> None:
    """Plain items cost the batch nothing more than a NULL: the statement skips the search."""
    held = [item for _, item in _held_sync(ctx, worker_rctx, 2)]
    sent: list[tuple[str, object]] = []

    def wrapper(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connections["system"].execute_wrapper(wrapper):
        complete_many([Fence.of(item) for item in held], [None, None])
    [(sql, params)] = sent
    assert sql == COMPLETE_MANY.native_sql and list(params)[-1] is None  # type: ignore[call-overload]
    assert all(row(item.id).result is None for item in held)


def _held_sync(ctx, worker_rctx, n: int):  # type: ignore[no-untyped-def]
    from workqueue.claim import claim
    from workqueue.enqueue import enqueue

    for i in range(n):
        enqueue(ctx, "NOOP", {"n": i}, lane="results")
    return claim(worker_rctx, "results", None, "w1", 30, n)


# -- refused when it cannot be stored ------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"tags": {"a", "b"}}, "result.tags: a set is not JSON; return str, int"),
        ([1, object()], "result[1]: a object is not JSON"),
        ({(1, 2): "x"}, "result: a key of type tuple is not JSON"),
        ({"ratio": math.nan}, "result.ratio: NaN and infinity cannot be stored"),
        ([math.inf], "result[0]: NaN and infinity cannot be stored"),
        ({"note": "a\x00b"}, "result.note: must not contain a NUL character"),
        ({"s": "\ud800"}, "result.s: must be valid Unicode"),
    ],
)
def test_what_json_or_jsonb_cannot_hold_is_refused_naming_where(value: object, says: str) -> None:
    with pytest.raises(UnstorableResult) as refused:
        result_json(value)
    assert str(refused.value).startswith(says)


def test_a_result_nested_too_deep_or_circular_is_refused() -> None:
    deep: list[object] = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(UnstorableResult, match="nested more than 64 levels"):
        result_json(deep)
    loop: dict[str, object] = {}
    loop["self"] = loop
    with pytest.raises(UnstorableResult, match="nested more than 64 levels"):
        result_json(loop)


def test_a_result_over_the_payload_bound_is_refused_with_what_to_do() -> None:
    with queue_settings(MAX_PAYLOAD_BYTES=100):
        assert result_json("x" * 98) == '"' + "x" * 98 + '"'
        with pytest.raises(UnstorableResult) as refused:
            result_json("x" * 99)
    assert str(refused.value) == (
        "result: 101 bytes of JSON, the limit is 100; return less (an id, a URL) or raise "
        "the limit WORKQUEUE['MAX_PAYLOAD_BYTES']"
    )


def test_an_unstorable_result_writes_nothing(face, ctx, worker_rctx) -> None:
    [(item_ctx, held)] = _held(face, ctx, worker_rctx)
    with pytest.raises(UnstorableResult, match="a set is not JSON"):
        face.complete(item_ctx, held, {1, 2})
    stored = row(held.id)
    assert (stored.status, stored.result, stored.claim_token) == (
        Status.CLAIMED,
        None,
        held.claim_token,
    )


# -- read by id, in the reader's tenant ----------------------------------------------------------


def test_another_tenants_result_is_not_found(face, ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    [(item_ctx, held)] = _held(face, other, worker_rctx)
    face.complete(item_ctx, held, {"secret": 1})
    assert face.results_of(ctx, [held.id]) == {}
    with pytest.raises(NotFound):
        face.result_of(ctx, held.id)
    with pytest.raises(NotFound):
        face.result_of(ctx, uuid.uuid4())
    assert face.result_of(other, held.id) == {"secret": 1}


def test_results_of_many_is_one_statement(ctx, worker_rctx) -> None:
    held = _held_sync(ctx, worker_rctx, 5)
    for i, (item_ctx, item) in enumerate(held):
        complete(item_ctx, item, {"i": i} if i % 2 else None)
    ids = [item.id for _, item in held]
    with statements("default") as sent:
        found = api.results_of(ctx, [*ids, uuid.uuid4()])
    assert [s for s in sent if "read_results" in s] == [READ_RESULTS.native_sql]
    assert found == {item_id: ({"i": i} if i % 2 else None) for i, item_id in enumerate(ids)}
    assert api.result_of(ctx, ids[0]) is None  # done, and it returned None
    pending, _ = api.enqueue(ctx, "NOOP", {})
    assert api.result_of(ctx, pending.id) is None  # not done yet


def test_results_of_refuses_a_bad_id_or_too_many(ctx) -> None:
    with pytest.raises(InvalidPayload, match="item_ids: must be a UUID"):
        api.results_of(ctx, ["not-an-id"])
    with pytest.raises(InvalidPayload, match=f"item_ids: at most {READ_MAX} per call"):
        api.results_of(ctx, [uuid.uuid4() for _ in range(READ_MAX + 1)])
    with pytest.raises(InvalidPayload, match="item_id: must be a UUID"):
        api.result_of(ctx, "nope")
    assert api.results_of(ctx, []) == {}
