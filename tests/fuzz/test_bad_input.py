"""Bad input (issue 13): property-based tests on every entry point that takes outside data.

For any input hypothesis draws (well-formed, subtly wrong, or hostile), the entry point either
stores it valid or refuses it with ``InvalidPayload`` whose message starts with the field it
blames; a refused input leaves no row (items, outbox, audit) and the caller's transaction
usable. Each example runs inside a caller's transaction that is rolled back after it.

Entry points now: ``enqueue``, ``enqueue_many``, ``outbox.emit``. The API body and headers
(issue 11), the admin's payload edit (issue 11) and the task backend's args (issue 12) join as
properties here, drawing from the same strategies.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from outbox.emit import emit
from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from tests import summary
from workqueue.api import (
    InvalidPayload,
    Kind,
    NewItem,
    Outcome,
    Payload,
    enqueue,
    enqueue_many,
    get_kind,
    register,
)
from workqueue.inputs import NAME_PATTERN

pytestmark = pytest.mark.usefixtures("committed")

SUITE = "bad input"
summary.FORMATS[SUITE] = lambda c: (
    f"bad input: {c['properties']} properties, {c['examples']} examples"
    f" ({c['stored']} stored valid, {c['refused']} refused naming the field),"
    f" rows left by a refusal {c['left']}, broken transactions {c['broken']}"
)
# Small enough that hypothesis draws payloads on both sides of it.
LIMIT = 600
FIELD = re.compile(
    r"^(items\[\d+\]\.)?(kind|payload|id|idempotency_key|lane|priority|available_at)\b"
    r"|^items\[\d+\]: must be a NewItem"
)
# Bounded so the suite stays fast; FUZZ_EXAMPLES=5000 for a longer hunt.
FAST = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "250")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class FreeForm(Payload):
    data: Any = None
    tags: dict[str, Any] = {}


FREE = register(Kind("FUZZ_FREE", FreeForm))


# -- strategies: each mixes valid values with near misses and hostile ones ----------------------

NASTY = st.sampled_from(
    [
        "",
        "a\x00b",
        "\ud800",
        "x\udc80y",
        "NaN",
        "Infinity",
        "\\u0000",
        "'; DROP TABLE workqueue_workitem; --",
        '","kind":"EVIL","org_id":"00000000-0000-0000-0000-000000000000',
        "\u202e\ufeff\u0301",
        "é" * 120,
    ]
)
texts = st.one_of(st.text(max_size=30), NASTY)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
payloads = st.one_of(
    st.fixed_dictionaries(
        {}, optional={"data": json_like, "tags": st.dictionaries(texts, json_like, max_size=3)}
    ),
    st.dictionaries(texts, json_like, max_size=3),  # unknown fields
    st.fixed_dictionaries({"data": st.text(min_size=LIMIT - 40, max_size=LIMIT + 40)}),
    st.fixed_dictionaries({"n": st.one_of(st.integers(), texts, st.floats())}),
    json_like,  # not an object at all
    st.sampled_from([object(), b"\xff", {1, 2}, {"data": b"\xff"}]),
)
kinds = st.one_of(st.sampled_from([FREE.name, FREE.name, "NOOP"]), texts)
ids = st.one_of(
    st.none(),
    st.uuids(),
    st.uuids().map(str),
    texts,
    st.integers(),
    st.uuids().map(lambda u: str(u)[:-1]),
)
lanes = st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_.:-]{1,55}", fullmatch=True), texts)
keys = st.one_of(st.none(), texts, st.text(min_size=195, max_size=205), st.integers())
priorities = st.one_of(
    st.integers(min_value=-40_000, max_value=40_000), st.booleans(), st.floats(), texts
)
offsets = st.timedeltas(min_value=-timedelta(hours=23), max_value=timedelta(hours=23)).map(timezone)
whens = st.one_of(
    st.none(),
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(timezones=offsets),
    st.datetimes(),  # naive
    texts,
)
FIELDS = ("kind", "payload", "id", "idempotency_key", "lane", "priority", "available_at")
ANY = {
    "kind": kinds,
    "payload": payloads,
    "id": ids,
    "idempotency_key": keys,
    "lane": lanes,
    "priority": priorities,
    "available_at": whens,
}
plain_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
VALID = {
    "kind": st.just(FREE.name),
    "payload": st.fixed_dictionaries(
        {}, optional={"data": plain_json, "tags": st.dictionaries(st.text(max_size=8), plain_json)}
    ),
    "id": st.one_of(st.none(), st.uuids(), st.uuids().map(str)),
    "idempotency_key": st.one_of(st.none(), st.text(min_size=1, max_size=200)),
    "lane": st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_.:-]{1,50}", fullmatch=True)),
    "priority": st.integers(min_value=-32768, max_value=32767),
    "available_at": st.one_of(st.none(), st.datetimes(timezones=offsets)),
}


@st.composite
def new_items(draw: st.DrawFn) -> NewItem:
    """Valid items, valid items with one field drawn from anything, and anything at all."""
    mode = draw(st.sampled_from(["valid", "one_off", "one_off", "anything"]))
    spoiled = draw(st.sampled_from(FIELDS))
    values = {
        field: draw(
            ANY[field]
            if mode == "anything" or (mode == "one_off" and field == spoiled)
            else VALID[field]
        )
        for field in FIELDS
    }
    return NewItem(**values)


# -- what the documented rules say about each simple field (workqueue/README.md) ----------------


def _storable_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


def wrong_fields(new: NewItem) -> set[str]:
    """The fields other than the payload that the rules refuse."""
    wrong = set()
    if not isinstance(new.kind, str) or new.kind not in (FREE.name, "NOOP"):
        wrong.add("kind")
    if new.id is not None and not isinstance(new.id, uuid.UUID):
        try:
            uuid.UUID(new.id)  # type: ignore[arg-type]
        except (TypeError, ValueError, AttributeError):
            wrong.add("id")
    if new.lane is not None and not (
        isinstance(new.lane, str) and len(new.lane) <= 50 and NAME_PATTERN.fullmatch(new.lane)
    ):
        wrong.add("lane")
    key = new.idempotency_key
    if key is not None and not (
        isinstance(key, str) and 0 < len(key) <= 200 and _storable_text(key)
    ):
        wrong.add("idempotency_key")
    if type(new.priority) is not int or not -32768 <= new.priority <= 32767:
        wrong.add("priority")
    when = new.available_at
    if when is not None and not (isinstance(when, datetime) and when.tzinfo is not None):
        wrong.add("available_at")
    return wrong


def free_payload_ok(payload: Any) -> bool | None:
    """Whether a FUZZ_FREE payload is storable: None when the size is too near the limit (or
    a value is not plain JSON) to tell by hand."""

    def plain(value: Any) -> bool | None:
        if value is None or isinstance(value, bool | int):
            return True
        if isinstance(value, float):
            return math.isfinite(value)
        if isinstance(value, str):
            return _storable_text(value)
        if isinstance(value, list):
            found = [plain(v) for v in value]
        elif isinstance(value, dict):
            found = [plain(k) and plain(v) for k, v in value.items()]
        else:
            return None
        return None if None in found else all(found)

    if not isinstance(payload, dict) or not set(payload) <= {"data", "tags"}:
        return False
    if "tags" in payload and not isinstance(payload["tags"], dict):
        return False
    ok = plain(payload)
    if not ok:
        return ok
    size = len(json.dumps(payload, ensure_ascii=False).encode())
    if size > LIMIT * 1.2:
        return False
    return True if size < LIMIT * 0.8 else None


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON means: a number is a number (jsonb gives 4.3e16 back as 43000000000000000,
    the same double), everything else as Python compares it."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return a == b


# -- the caller's transaction -------------------------------------------------------------------


def rows(ctx: OpContext) -> tuple[int, int, int]:
    """The tenant's items, outbox rows and audit entries, as the caller's transaction sees
    them (a failed statement would have broken it: this would raise)."""
    with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM workqueue_workitem),"
            " (SELECT count(*) FROM outbox_outboxrow), (SELECT count(*) FROM audit_auditentry)"
        )
        return cursor.fetchone()


@contextmanager
def callers_transaction() -> Iterator[None]:
    """One example's caller: an open transaction, rolled back after it."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def refused_cleanly(ctx: OpContext, exc: InvalidPayload, before: tuple[int, int, int]) -> str:
    """The refusal names a field, left no row, and the transaction still takes a write."""
    message = str(exc)
    found = FIELD.match(message)
    assert found, f"the error names no field: {message!r}"
    after = rows(ctx)
    if after != before:
        summary.count(SUITE, "left")
    assert after == before, f"a refused input left rows: {before} -> {after}"
    try:
        enqueue(ctx, "NOOP", {"n": 1})
    except Exception:
        summary.count(SUITE, "broken")
        raise
    summary.count(SUITE, "refused")
    return found.group(2) or "item"


def _tally(name: str) -> None:
    summary.count(SUITE, "examples")
    summary.count(SUITE, f"property:{name}")


def _property_ran(name: str) -> None:
    summary.count(SUITE, "properties")


# -- the properties -----------------------------------------------------------------------------


@override_settings(WORKQUEUE_MAX_PAYLOAD_BYTES=LIMIT)
def test_enqueue_stores_valid_or_refuses_naming_the_field(ctx: OpContext) -> None:
    @FAST
    @given(new=new_items())
    def check(new: NewItem) -> None:
        _tally("enqueue")
        wrong = wrong_fields(new)
        payload_ok = free_payload_ok(new.payload) if new.kind == FREE.name else None
        with callers_transaction():
            before = rows(ctx)
            try:
                item, outcome = enqueue(
                    ctx,
                    new.kind,
                    new.payload,
                    id=new.id,
                    idempotency_key=new.idempotency_key,
                    lane=new.lane,
                    priority=new.priority,
                    available_at=new.available_at,
                )
            except InvalidPayload as exc:
                blamed = refused_cleanly(ctx, exc, before)
                assert blamed in wrong or (blamed == "payload" and payload_ok is not True), (
                    f"blamed {blamed}, the rules find {sorted(wrong)} wrong"
                )
                return
            assert not wrong, f"stored although {sorted(wrong)} break the rules"
            assert payload_ok is not False, f"stored an off-schema payload {new.payload!r}"
            assert outcome == Outcome.INSERTED
            _stored_as_given(ctx, new, item.id)
            summary.count(SUITE, "stored")

    check()
    _property_ran("enqueue")


def _stored_as_given(ctx: OpContext, new: NewItem, item_id: uuid.UUID) -> None:
    """The stored row is the caller's tenant's, pending, and means what was sent."""
    from workqueue.models import WorkItem

    with tenant_scope(ctx.org_id):
        stored = WorkItem.objects.get(pk=item_id)
    kind = get_kind(new.kind)
    assert (stored.org_id, stored.created_by, stored.status, stored.attempts) == (
        ctx.org_id,
        ctx.user_id,
        "pending",
        0,
    )
    assert stored.kind == kind.name and stored.lane == (new.lane or kind.lane)
    assert stored.idempotency_key == new.idempotency_key and stored.priority == new.priority
    assert same_json(
        kind.schema.model_validate(stored.payload).model_dump(),
        kind.schema.model_validate(new.payload).model_dump(),
    )
    if new.available_at is not None:
        assert stored.available_at == new.available_at


@override_settings(WORKQUEUE_MAX_PAYLOAD_BYTES=LIMIT)
def test_enqueue_many_stores_the_batch_or_nothing(ctx: OpContext) -> None:
    batches = st.lists(st.one_of(new_items(), new_items(), st.just({"kind": "NOOP"})), max_size=5)

    @FAST
    @given(batch=batches)
    def check(batch: list[Any]) -> None:
        _tally("enqueue_many")
        with callers_transaction():
            before = rows(ctx)
            try:
                results = enqueue_many(ctx, batch)
            except InvalidPayload as exc:
                refused_cleanly(ctx, exc, before)
                index = re.match(r"^items\[(\d+)\]", str(exc))
                assert index, f"the error names no item: {exc}"
                # Items are checked in order: none before the first that may be wrong is blamed.
                first_bad = next(
                    (
                        i
                        for i, new in enumerate(batch)
                        if not isinstance(new, NewItem)
                        or wrong_fields(new)
                        or not (new.kind == FREE.name and free_payload_ok(new.payload))
                    ),
                    len(batch),
                )
                assert int(index.group(1)) >= first_bad
                return
            for new in batch:
                assert isinstance(new, NewItem) and not wrong_fields(new), new
                if new.kind == FREE.name:
                    assert free_payload_ok(new.payload) is not False, new.payload
            inserted = {i for i, outcome in results if outcome == Outcome.INSERTED}
            assert rows(ctx)[0] == before[0] + len(inserted)
            summary.count(SUITE, "stored")

    check()
    _property_ran("enqueue_many")


@override_settings(WORKQUEUE_MAX_PAYLOAD_BYTES=LIMIT)
def test_emit_stores_one_row_or_refuses_naming_the_field(ctx: OpContext) -> None:
    outbox_kinds = st.one_of(
        st.sampled_from([f"work.{FREE.name}", "work.NOOP", "shipment_events"]),
        texts.map(lambda t: f"work.{t}"),
        texts,
    )
    emitted_payloads = st.one_of(
        VALID["payload"],
        VALID["payload"].map(lambda p: {**p, "lane": "default"}),
        payloads,
        payloads.map(lambda p: {**p, "lane": "x y"} if isinstance(p, dict) else p),
    )

    @FAST
    @given(kind=outbox_kinds, payload=emitted_payloads)
    def check(kind: Any, payload: Any) -> None:
        _tally("emit")
        with callers_transaction():
            before = rows(ctx)
            try:
                row_id = emit(ctx, kind, payload)
            except InvalidPayload as exc:
                blamed = refused_cleanly(ctx, exc, before)
                assert blamed in ("kind", "payload", "lane"), blamed
                return
            after = rows(ctx)
            assert after == (before[0], before[1] + 1, before[2])
            from outbox.models import OutboxRow

            with tenant_scope(ctx.org_id):
                stored = OutboxRow.objects.get(pk=row_id)
            assert (stored.org_id, stored.actor_id, stored.kind) == (ctx.org_id, ctx.user_id, kind)
            if kind.startswith("work."):
                body = {k: v for k, v in payload.items() if k != "lane"}
                schema = get_kind(kind[5:]).schema
                kept = {k: v for k, v in stored.payload.items() if k != "lane"}
                assert same_json(
                    schema.model_validate(kept).model_dump(),
                    schema.model_validate(body).model_dump(),
                )
            summary.count(SUITE, "stored")

    check()
    _property_ran("emit")


def test_the_strategies_reach_both_sides(ctx: OpContext) -> None:
    """A property that only ever refused (or only stored) would prove little."""
    counts = summary.COUNTS.get(SUITE)
    if not counts or counts["properties"] < 3:
        pytest.skip("run with the properties above")
    assert counts["stored"] > 30 and counts["refused"] > 30, dict(counts)
