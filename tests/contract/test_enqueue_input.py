"""Outside input to enqueue, tried as an attacker would: refused before any statement runs,
naming the field, storing nothing, and leaving the caller's transaction usable."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import transaction

from tenancy.contexts import OpContext
from tests.helpers import queue_settings, statements
from workqueue.api import (
    InvalidPayload,
    Kind,
    NewItem,
    Outcome,
    Payload,
    enqueue,
    enqueue_many,
    register,
)
from workqueue.models import WorkItem
from workqueue.runtime import PAYLOAD_DEPTH_MAX


class FreeForm(Payload):
    data: Any = None
    tags: dict[str, Any] = {}


register(Kind("TEST_FREE_FORM", FreeForm))


def _stored() -> int:
    return WorkItem.objects.using("admin").count()


CRAFTED_IDS = [
    # closes the JSON object early and smuggles a second row with its own kind and attempts
    (
        '0190a0b0-0000-7000-8000-000000000001","kind":"EVIL","lane":"default","payload":{},'
        '"idempotency_key":null,"priority":0,"max_attempts":1000000,"available_at":null},'
        '{"id":"0190a0b0-0000-7000-8000-000000000002'
    ),
    'x" , "kind": "EVIL',
    "'; DROP TABLE workqueue_workitem; --",
    "not-a-uuid",
    "",
    "0190a0b0-0000-7000-8000-00000000000\u0000",
    12345,
]


@pytest.mark.parametrize("crafted", CRAFTED_IDS)
def test_a_crafted_id_in_a_batch_is_refused_and_nothing_is_stored(ctx: OpContext, crafted) -> None:
    batch = [NewItem("NOOP", {"n": 1}), NewItem("NOOP", {"n": 2}, id=crafted)]
    with statements("default", "system") as sent:
        with pytest.raises(InvalidPayload, match=r"items\[1\]\.id: must be a UUID"):
            enqueue_many(ctx, batch)
    assert sent == [] and _stored() == 0


@pytest.mark.parametrize("crafted", CRAFTED_IDS)
def test_a_crafted_id_alone_is_invalid_payload_not_a_driver_error(ctx, crafted) -> None:
    with transaction.atomic():
        with pytest.raises(InvalidPayload, match="id: must be a UUID"):
            enqueue(ctx, "NOOP", {}, id=crafted)
        # the caller's transaction is still usable
        _, outcome = enqueue(ctx, "NOOP", {"n": 3})
    assert outcome == Outcome.INSERTED and _stored() == 1


@pytest.mark.parametrize(
    ("when", "says"),
    [
        # Found by tests/fuzz: an offset with seconds made the batch's JSON a timestamp
        # PostgreSQL refuses (a DataError that broke the caller's transaction).
        (datetime(2000, 1, 1, tzinfo=timezone(timedelta(microseconds=1))), None),
        (datetime(2000, 1, 1, tzinfo=timezone(timedelta(seconds=-59))), None),
        # ... and a moment before year 1 in UTC was stored, then could not be read back.
        (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))), "available_at: must fall in"),
        (datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))), "available_at: must"),
    ],
)
def test_any_time_zone_is_stored_as_the_same_moment_in_both_shapes(
    ctx: OpContext, when: datetime, says: str | None
) -> None:
    with transaction.atomic():
        if says is not None:
            with pytest.raises(InvalidPayload, match=says):
                enqueue(ctx, "NOOP", {}, available_at=when)
            with pytest.raises(InvalidPayload, match=rf"items\[0\]\.{says}"):
                enqueue_many(ctx, [NewItem("NOOP", {}, available_at=when)])
            enqueue(ctx, "NOOP", {})  # still usable
            return
        one, _ = enqueue(ctx, "NOOP", {}, available_at=when)
        [(many, _)] = enqueue_many(ctx, [NewItem("NOOP", {}, available_at=when)])
    for item_id in (one.id, many):
        assert WorkItem.objects.using("admin").get(pk=item_id).available_at == when


def test_a_uuid_given_as_text_is_accepted(ctx: OpContext) -> None:
    wanted = uuid.uuid4()
    item, _ = enqueue(ctx, "NOOP", {}, id=str(wanted))
    assert item.id == wanted


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("priority", '1,"max_attempts":99', "priority: must be an integer"),
        ("priority", True, "priority: must be an integer"),
        ("priority", 40000, "priority: must be an integer"),
        ("lane", 'a","kind":"EVIL', "lane: must be 1 to 50"),
        ("lane", "", "lane: must be a non-empty string"),
        ("lane", "x" * 51, "lane: must be 1 to 50"),
        ("lane", "a\u0000b", "lane: must be 1 to 50"),
        ("idempotency_key", "a\u0000b", "idempotency_key: must not contain a NUL"),
        ("idempotency_key", "x" * 201, "idempotency_key: must be at most 200"),
        ("idempotency_key", "\ud800", "idempotency_key: must be valid Unicode"),
        ("available_at", "2026-01-01", "available_at: must be a datetime"),
    ],
)
def test_every_field_is_checked_in_both_shapes(ctx, field: str, value, says: str) -> None:
    with transaction.atomic():
        with pytest.raises(InvalidPayload, match=says):
            enqueue(ctx, "NOOP", {}, **{field: value})
        with pytest.raises(InvalidPayload, match=rf"items\[0\]\.{says}"):
            enqueue_many(ctx, [NewItem("NOOP", {}, **{field: value})])
        enqueue(ctx, "NOOP", {})  # still usable
    assert _stored() == 1


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"data": float("nan")}, "payload.data: NaN and infinity cannot be stored"),
        ({"data": [1, float("inf")]}, r"payload.data\[1\]: NaN and infinity"),
        ({"tags": {"x": {"y": float("-inf")}}}, "payload.tags.x.y: NaN and infinity"),
        ({"data": "a\u0000b"}, "payload.data: must not contain a NUL"),
        ({"tags": {"k\u0000": 1}}, "payload.tags key: must not contain a NUL"),
        ({"data": "\udc80"}, "payload.data: must be valid Unicode"),
        # pydantic would write this key as U+FFFD: stored, but not what was sent.
        ({"tags": {"\ud800": 1}}, "payload.tags key: must be valid Unicode"),
    ],
)
def test_what_jsonb_cannot_hold_is_refused_naming_the_field(ctx, payload, says: str) -> None:
    with transaction.atomic():
        with pytest.raises(InvalidPayload, match=says):
            enqueue(ctx, "TEST_FREE_FORM", payload)
        enqueue(ctx, "NOOP", {})
    assert _stored() == 1


def test_text_that_only_looks_suspect_is_stored(ctx: OpContext) -> None:
    payload = {"data": "NaN Infinity \\u0000 \ufffd are just words here", "tags": {"\ufffd": 1}}
    item, _ = enqueue(ctx, "TEST_FREE_FORM", payload)
    assert WorkItem.objects.using("admin").get(pk=item.id).payload["data"] == payload["data"]


def test_a_payload_over_the_size_limit_is_refused_naming_the_setting(ctx: OpContext) -> None:
    big = {"data": "x" * (256 * 1024)}
    with pytest.raises(InvalidPayload, match="MAX_PAYLOAD_BYTES"):
        enqueue(ctx, "TEST_FREE_FORM", big)
    with queue_settings(MAX_PAYLOAD_BYTES=1024 * 1024):
        enqueue(ctx, "TEST_FREE_FORM", big)
    multibyte = {"data": "\u00e9" * (140 * 1024)}  # 140 KiB of characters, 280 KiB of UTF-8
    with pytest.raises(InvalidPayload, match="bytes is more than"):
        enqueue(ctx, "TEST_FREE_FORM", multibyte)
    assert _stored() == 1


def test_the_same_id_twice_in_a_batch_is_one_insert_and_one_id_exists(ctx: OpContext) -> None:
    same = uuid.uuid4()
    results = enqueue_many(
        ctx,
        [
            NewItem("NOOP", {"n": 1}, id=same),
            NewItem("NOOP", {"n": 2}, id=same),
            NewItem("NOOP", {"n": 3}, idempotency_key="k"),
            NewItem("NOOP", {"n": 4}, idempotency_key="k"),
        ],
    )
    assert [outcome for _, outcome in results] == [
        Outcome.INSERTED,
        Outcome.ID_EXISTS,
        Outcome.INSERTED,
        Outcome.KEY_EXISTS,
    ]
    assert results[0][0] == results[1][0] == same and results[2][0] == results[3][0]
    assert _stored() == 2
    assert WorkItem.objects.using("admin").get(pk=same).payload == {"n": 1}


def test_a_batch_item_that_is_not_a_new_item_is_refused(ctx: OpContext) -> None:
    with pytest.raises(InvalidPayload, match=r"items\[0\]"):
        enqueue_many(ctx, [{"kind": "NOOP", "payload": {}}])  # type: ignore[list-item]
    assert _stored() == 0


def test_names_the_columns_cannot_hold_are_refused_where_they_are_declared() -> None:
    with pytest.raises(ValueError, match="must be 1 to 100"):
        Kind("K" * 101, FreeForm)
    with pytest.raises(ValueError, match="lane"):
        Kind("TEST_LONG_LANE", FreeForm, lane="l" * 51)
    with pytest.raises(ValueError, match="max_attempts"):
        Kind("TEST_NO_ATTEMPTS", FreeForm, max_attempts=0)


def test_the_stored_json_is_the_validated_json(ctx: OpContext) -> None:
    payload = {"data": {"quote": '"', "backslash": "\\", "close": '"}]},{'}}
    [(item_id, _)] = enqueue_many(ctx, [NewItem("TEST_FREE_FORM", payload)])
    stored = WorkItem.objects.using("admin").get(pk=item_id)
    assert stored.payload["data"] == json.loads(json.dumps(payload))["data"]
    assert stored.kind == "TEST_FREE_FORM"


def test_a_producer_may_name_the_items_max_attempts(ctx: OpContext) -> None:
    item, _ = enqueue(ctx, "NOOP", {}, max_attempts=9)
    [(new_id, _)] = enqueue_many(ctx, [NewItem("NOOP", {}, max_attempts=1)])
    stored = WorkItem.objects.using("admin").in_bulk([item.id, new_id])
    assert (item.max_attempts, stored[item.id].max_attempts) == (9, 9)
    assert stored[new_id].max_attempts == 1
    default, _ = enqueue(ctx, "NOOP", {})
    assert default.max_attempts == 3  # the kind's


@pytest.mark.parametrize("crafted", [0, -1, 1001, 10**12, "3", 2.0, True, [3]])
def test_a_bad_max_attempts_is_refused_and_nothing_is_stored(ctx: OpContext, crafted) -> None:
    with statements("default", "system") as sent:
        with pytest.raises(InvalidPayload, match="max_attempts: must be an integer from 1 to 1000"):
            enqueue(ctx, "NOOP", {}, max_attempts=crafted)
        with pytest.raises(InvalidPayload, match=r"items\[0\]\.max_attempts: must be"):
            enqueue_many(ctx, [NewItem("NOOP", {}, max_attempts=crafted)])
    assert sent == [] and _stored() == 0


def test_a_batch_naming_another_tenants_id_stores_nothing(face, ctx: OpContext, make_ctx) -> None:
    """Found by the attack suite: the rest of the batch was stored before the clash was seen."""
    from workqueue.api import Conflict

    theirs, _ = enqueue(make_ctx(), "NOOP", {"n": 0})
    batch = [NewItem("NOOP", {"n": 1}), NewItem("NOOP", {"n": 2}, id=theirs.id)]
    with pytest.raises(Conflict, match="is taken: nothing was stored"):
        face.enqueue_many(ctx, batch)
    assert WorkItem.objects.using("admin").filter(org_id=ctx.org_id).count() == 0
    # Ids of the caller's own, or new ones, still go through.
    mine, _ = enqueue(ctx, "NOOP", {"n": 3})
    again = face.enqueue_many(ctx, [NewItem("NOOP", {}, id=mine.id), NewItem("NOOP", {})])
    assert [outcome for _, outcome in again] == [Outcome.ID_EXISTS, Outcome.INSERTED]


def _nested(depth: int, shape: str) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if shape == "list" else {"k": value}
    return value


@pytest.mark.parametrize("shape", ["list", "dict"])
@pytest.mark.parametrize("depth", [PAYLOAD_DEPTH_MAX, 1_000, 10_000])
@pytest.mark.parametrize("field", ["data", "tags"])
def test_a_payload_nested_too_deep_is_refused_in_every_shape(
    ctx: OpContext, shape: str, depth: int, field: str
) -> None:
    # Found by an outside suite: 10,000 levels made enqueue raise RecursionError.
    value = _nested(depth, shape) if field == "data" else {"a": _nested(depth, shape)}
    payload = {field: value}
    says = rf"payload\.{field}[^:]*: nested more than {PAYLOAD_DEPTH_MAX} levels deep"
    with statements("default", "system") as sent:
        with pytest.raises(InvalidPayload, match=says):
            enqueue(ctx, "TEST_FREE_FORM", payload)
        with pytest.raises(InvalidPayload, match=says):
            enqueue_many(ctx, [NewItem("TEST_FREE_FORM", {}), NewItem("TEST_FREE_FORM", payload)])
    with transaction.atomic():
        with pytest.raises(InvalidPayload, match=says):
            enqueue(ctx, "TEST_FREE_FORM", payload)
        _, outcome = enqueue(ctx, "NOOP", {"n": 1})  # the caller's transaction is usable
    assert sent == [] and outcome == Outcome.INSERTED and _stored() == 1


def test_a_payload_at_the_depth_limit_is_stored(ctx: OpContext) -> None:
    # The payload object is one level, its field's value the rest.
    _, outcome = enqueue(ctx, "TEST_FREE_FORM", {"data": _nested(PAYLOAD_DEPTH_MAX - 1, "list")})
    assert outcome == Outcome.INSERTED and _stored() == 1


def test_an_outbox_row_nested_too_deep_is_refused(ctx: OpContext) -> None:
    from outbox.emit import emit
    from outbox.models import OutboxRow

    for kind in ("work.TEST_FREE_FORM", "shipment_booked"):
        with pytest.raises(InvalidPayload, match="nested more than"):
            emit(ctx, kind, {"data": _nested(10_000, "list")})
    assert OutboxRow.objects.using("admin").count() == 0
