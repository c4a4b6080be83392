"""Bad input (issue 13): property-based tests on every entry point that takes outside data.

For any input hypothesis draws (well-formed, subtly wrong, or hostile), the entry point either
stores it valid or refuses it with ``InvalidPayload`` whose message starts with the field it
blames; a refused input leaves no row (items, outbox, audit) and the caller's transaction
usable. Each example runs inside a caller's transaction that is rolled back after it.

Entry points: ``enqueue``, ``enqueue_many``, ``outbox.emit``; the JSON API's body and headers
(``POST /api/work/``: stored valid, or a 4xx whose ``field`` names what is wrong, no item,
outbox row, audit entry or stored answer left); the admin's payload edit (saved valid for the
item's kind, or the confirmation page again naming the payload, the item unchanged); and the
``django.tasks`` backend's arguments (enqueued as JSON, or refused naming the argument). They
draw from the same strategies.
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
from django.utils.dateparse import parse_datetime
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from outbox.emit import emit
from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from tests import summary
from tests.helpers import queue_settings
from workers.django_tasks import values as task_values_module
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
from workqueue.inputs import NAME_PATTERN
from workqueue.runtime import PAYLOAD_DEPTH_MAX, declared_lanes, get_kind
from workqueue.views import field_name

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
    elif when is not None:
        try:  # a moment whose UTC date leaves years 1-9999 (year 1 at +00:00:00.000001)
            when.astimezone(UTC)
        except OverflowError:
            wrong.add("available_at")
    return wrong


def free_payload_ok(payload: Any) -> bool | None:
    """Whether a FUZZ_FREE payload is storable: None when the size is too near the limit (or
    a value is not plain JSON) to tell by hand. Lists and objects nest at most
    ``PAYLOAD_DEPTH_MAX`` levels, the payload's own included."""

    def plain(value: Any, depth: int = 0) -> bool | None:
        if value is None or isinstance(value, bool | int):
            return True
        if isinstance(value, float):
            return math.isfinite(value)
        if isinstance(value, str):
            return _storable_text(value)
        if isinstance(value, list | dict) and depth >= PAYLOAD_DEPTH_MAX:
            return False
        if isinstance(value, list):
            found = [plain(v, depth + 1) for v in value]
        elif isinstance(value, dict):
            found = [plain(k) and plain(v, depth + 1) for k, v in value.items()]
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
            " (SELECT count(*) FROM workqueue_outbox_outboxrow),"
            " (SELECT count(*) FROM workqueue_audit_auditentry)"
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


@queue_settings(MAX_PAYLOAD_BYTES=LIMIT)
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


@queue_settings(MAX_PAYLOAD_BYTES=LIMIT)
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


@queue_settings(MAX_PAYLOAD_BYTES=LIMIT)
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
            assert (stored.org_id, stored.actor, stored.kind) == (ctx.org_id, ctx.user_id, kind)
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


# -- the JSON API: POST /api/work/ ----------------------------------------------------------------

API_URL = "/api/work/"
API_FIELDS = ("kind", "payload", "idempotency_key", "run_at", "priority", "lane")
# JSON values only (the API's body is JSON text): NaN and infinity are written as the tokens
# Python writes, which the API must refuse.
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        texts,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
moments = st.datetimes(timezones=offsets)
API_VALID = {
    "kind": st.just(FREE.name),
    "payload": VALID["payload"],
    "idempotency_key": VALID["idempotency_key"],
    "run_at": st.one_of(
        st.none(),
        st.datetimes(
            min_value=datetime(1900, 1, 1), max_value=datetime(2999, 1, 1), timezones=offsets
        ).map(datetime.isoformat),
    ),
    "priority": VALID["priority"],
    # The API takes a lane the site declares (workqueue.lanes): the reference site's "default".
    "lane": st.one_of(st.none(), st.just("default")),
}
API_ANY = {
    "kind": st.one_of(kinds, st.integers(), st.lists(texts, max_size=2)),
    "payload": st.one_of(
        st.fixed_dictionaries(
            {}, optional={"data": json_values, "tags": st.dictionaries(texts, json_values)}
        ),
        st.dictionaries(texts, json_values, max_size=3),
        st.fixed_dictionaries({"data": st.text(min_size=LIMIT - 40, max_size=LIMIT + 40)}),
        json_values,
    ),
    "idempotency_key": st.one_of(
        st.none(), texts, st.text(min_size=195, max_size=205), st.integers()
    ),
    "run_at": st.one_of(
        moments.map(datetime.isoformat),  # years 1 to 9999, any offset: some leave UTC's range
        st.sampled_from(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]),
        st.datetimes().map(datetime.isoformat),  # naive
        texts,
        st.integers(),
        st.floats(),
    ),
    "priority": st.one_of(priorities, st.integers(min_value=-(2**40), max_value=2**40)),
    "lane": st.one_of(lanes, st.integers(), st.just("default")),
}
EXTRA_FIELDS = st.one_of(
    st.sampled_from(["org_id", "org", "created_by", "id", "status", "claim_token", "attempts"]),
    texts,
)
# A visible-ASCII key is a valid Idempotency-Key; headers travel as Latin-1 text.
header_texts = st.text(alphabet=st.characters(max_codepoint=255), max_size=30)
header_keys = st.one_of(
    st.none(),
    st.none(),
    st.from_regex(r"[\x21-\x7e]{1,200}", fullmatch=True),
    header_texts,
    st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=199, max_size=202
    ),
)
CONTENT_TYPES = st.one_of(
    st.just("application/json"),
    st.just("application/json"),
    st.sampled_from(
        [
            "application/json; charset=utf-8",
            "application/json; charset=UTF8",
            "application/json; charset=latin-1",
            "text/plain",
            "application/x-www-form-urlencoded",
            "",
        ]
    ),
)
ORGS = st.sampled_from([None, None, None, None, "own", "other", "garbage", "", "OWN"])


@st.composite
def api_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A request to ``POST /api/work/``: its body (JSON text, or any bytes), and its
    Content-Type, Idempotency-Key and X-Org-ID headers."""
    mode = draw(st.sampled_from(["valid", "one_off", "one_off", "anything", "raw"]))
    if mode == "raw":
        raw = draw(
            st.one_of(
                st.binary(max_size=40),
                st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
                json_values.map(lambda v: json.dumps(v).encode()),
                st.just(b"[" * 5000 + b"]" * 5000),
                st.just(b'{"kind": "FUZZ_FREE", "payload": {}'),
            )
        )
    else:
        spoiled = draw(st.sampled_from((*API_FIELDS, "extra", "missing")))
        body: dict[str, Any] = {}
        for field in API_FIELDS:
            if field not in ("kind", "payload") and not draw(st.booleans()):
                continue
            bad = mode == "anything" or field == spoiled
            body[field] = draw(API_ANY[field] if bad else API_VALID[field])
        if spoiled == "extra" or (mode == "anything" and draw(st.booleans())):
            body[draw(EXTRA_FIELDS)] = draw(json_values)
        if spoiled == "missing":
            body.pop(draw(st.sampled_from(["kind", "payload"])))
        raw = json.dumps(body).encode()
    return {
        "raw": raw,
        "content_type": draw(CONTENT_TYPES),
        "key": draw(header_keys),
        "org": draw(ORGS),
    }


def _refuse_constant(name: str) -> None:
    raise ValueError(name)


def api_wrong(request: dict[str, Any], own_org: uuid.UUID) -> tuple[set[str], bool | None]:
    """What the documented rules find wrong with a request (field names, as the API names
    them), and whether its payload is storable (None: cannot tell by hand)."""
    wrong: set[str] = set()
    org = {"own": str(own_org), "other": str(uuid.uuid4()), "OWN": str(own_org).upper()}.get(
        request["org"], request["org"]
    )
    if org not in (None, "", str(own_org)):
        wrong.add("X-Org-ID")
    content_type = request["content_type"].split(";")[0].strip()
    charset = request["content_type"].partition("charset=")[2].strip().lower()
    # (An empty body is sent with no Content-Type by Django's test client.)
    if (
        content_type != "application/json"
        or charset not in ("", "utf-8", "utf8")
        or not request["raw"]
    ):
        wrong.add("Content-Type")
    key = request["key"]
    if key is not None and not (0 < len(key) <= 200 and re.fullmatch(r"[\x21-\x7e]+", key)):
        wrong.add("Idempotency-Key")
    try:
        body = json.loads(request["raw"].decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return wrong | {"body"}, None
    if not isinstance(body, dict):
        return wrong | {"body"}, None
    wrong |= {field_name(name) for name in body if name not in API_FIELDS}
    wrong |= {name for name in ("kind", "payload") if name not in body}
    new = NewItem(
        kind=body.get("kind"),
        payload=body.get("payload"),
        idempotency_key=body.get("idempotency_key"),
        lane=body.get("lane"),
        priority=body.get("priority", 0),
    )
    wrong |= wrong_fields(new) - {"available_at", "id"}
    if isinstance(new.lane, str) and new.lane not in declared_lanes():
        wrong.add("lane")  # a lane name, but not one the site declares
    run_at = body.get("run_at")
    if run_at is not None:
        when = None
        if isinstance(run_at, str) and len(run_at) <= 64:
            try:
                when = parse_datetime(run_at)
            except ValueError:
                pass
        try:
            ok = when is not None and when.tzinfo is not None and when.astimezone(UTC)
        except OverflowError:
            ok = False
        if not ok:
            wrong.add("run_at")
    payload_ok = free_payload_ok(body.get("payload")) if body.get("kind") == FREE.name else None
    return wrong, payload_ok


def api_rows(ctx: OpContext) -> tuple[int, int, int, int]:
    """``rows`` and the tenant's stored Idempotency-Key answers."""
    with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM workqueue_storedresponse")
        return (*rows(ctx), cursor.fetchone()[0])


@queue_settings(MAX_PAYLOAD_BYTES=LIMIT)
def test_the_api_stores_valid_or_answers_4xx_naming_the_field(ctx: OpContext) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    User = get_user_model()

    client = Client()
    client.force_login(User.objects.using("admin").get(pk=ctx.user_id))

    @FAST
    @given(request=api_requests())
    # Found here: pydantic wrote this key as U+FFFD, so it was stored, not what was sent.
    @example(
        request={
            "raw": b'{"kind": "FUZZ_FREE", "payload": {"tags": {"\\ud800": null}}}',
            "content_type": "application/json",
            "key": None,
            "org": None,
        }
    )
    def check(request: dict[str, Any]) -> None:
        _tally("api")
        wrong, payload_ok = api_wrong(request, ctx.org_id)
        headers: dict[str, str] = {}
        if request["key"] is not None:
            headers["HTTP_IDEMPOTENCY_KEY"] = request["key"]
        if request["org"] is not None:
            headers["HTTP_X_ORG_ID"] = {
                "own": str(ctx.org_id),
                "other": str(uuid.uuid4()),
                "OWN": str(ctx.org_id).upper(),
            }.get(request["org"], request["org"])
        with callers_transaction():
            before = api_rows(ctx)
            # generic(): the body's bytes as drawn (post() would re-encode them to the charset).
            response = client.generic(
                "POST", API_URL, request["raw"], content_type=request["content_type"], **headers
            )
            assert response.status_code < 500, response.content[:500]
            answer = response.json()
            if response.status_code >= 400:
                blamed = answer.get("field")
                assert blamed and answer["error"].startswith(f"{blamed}: "), answer
                after = api_rows(ctx)
                if after != before:
                    summary.count(SUITE, "left")
                assert after == before, f"a refused request left rows: {before} -> {after}"
                top = blamed.split(".")[0]
                assert blamed in wrong or (top == "payload" and payload_ok is not True), (
                    f"blamed {blamed}, the rules find {sorted(wrong)} wrong: {answer}"
                )
                _still_usable(ctx)
                summary.count(SUITE, "refused")
                return
            assert response.status_code == 201, (response.status_code, answer)
            assert not wrong, f"stored although {sorted(wrong)} break the rules"
            assert payload_ok is not False, f"stored an off-schema payload: {request['raw']!r}"
            body = json.loads(request["raw"])
            run_at = body.get("run_at")
            new = NewItem(
                kind=body["kind"],
                payload=body["payload"],
                idempotency_key=body.get("idempotency_key"),
                lane=body.get("lane"),
                priority=body.get("priority", 0),
                available_at=parse_datetime(run_at) if run_at else None,
            )
            _stored_as_given(ctx, new, uuid.UUID(answer["item"]["id"]))
            stored_answers = 1 if request["key"] is not None else 0
            assert api_rows(ctx) == (
                before[0] + 1,
                before[1],
                before[2],
                before[3] + stored_answers,
            )
            summary.count(SUITE, "stored")

    check()
    _property_ran("api")


def _still_usable(ctx: OpContext) -> None:
    try:
        enqueue(ctx, "NOOP", {"n": 1})
    except Exception:
        summary.count(SUITE, "broken")
        raise


# -- the admin's payload edit ---------------------------------------------------------------------

# What an operator types into the payload box: JSON text of anything, NaN and overflowing
# numbers, escaped lone surrogates and NULs, broken JSON, deep nesting, and plain text.
payload_texts = st.one_of(
    VALID["payload"].map(json.dumps),
    VALID["payload"].map(lambda p: json.dumps(p, indent=2, ensure_ascii=False)),
    API_ANY["payload"].map(json.dumps),
    json_values.map(json.dumps),
    st.sampled_from(
        [
            '{"data": 1e999}',
            '{"data": -1e999}',
            '{"data": "\\u0000"}',
            '{"tags": {"\\ud800": 1}}',
            '{"data": 1',
            "",
            "null",
            "[" * 3000 + "]" * 3000,
            '{"data": ' + "[" * 200 + "]" * 200 + "}",
            '{"data": 1, "data": 2}',
            '{"org_id": SYSTEM_ACTOR}',
        ]
    ),
    st.text(max_size=40).filter(lambda t: _storable_text(t)),
)


def _edit_outcome(text: str) -> tuple[bool | None, Any]:
    """Whether the rules accept ``text`` as a FUZZ_FREE payload (None: cannot tell by hand),
    and the payload it means."""
    try:
        payload = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return False, None
    return free_payload_ok(payload), payload


@queue_settings(MAX_PAYLOAD_BYTES=LIMIT)
def test_the_admins_payload_edit_saves_valid_or_names_the_field(ctx: OpContext) -> None:
    import html

    from django.test import Client

    from audit.models import AuditEntry
    from tenancy.contexts import AppType, Role, new_request_context
    from tests.factories import MembershipFactory, UserFactory
    from tests.helpers import dead_letter, row
    from workqueue.triage import Drawn

    staff = MembershipFactory(org_id=ctx.org_id, user=UserFactory(is_staff=True), role=Role.ADMIN)
    client = Client()
    client.force_login(staff.user)
    worker = new_request_context(AppType.WORKER)

    def trail(item_id: uuid.UUID) -> list[str]:
        entries = AuditEntry.objects.using("admin").filter(subject_id=str(item_id))
        return sorted(entries.values_list("action", flat=True))

    @FAST
    @given(text=payload_texts)
    def check(text: str) -> None:
        _tally("payload edit")
        ok, meant = _edit_outcome(text)
        dead = dead_letter(ctx, worker, payload={"data": "before"}, kind=FREE.name)
        first = row(dead.id)
        before = rows(ctx)
        response = client.post(
            "/admin/workqueue/deadletter/",
            {
                "action": "edit_payload",
                "_selected_action": [str(dead.id)],
                "fence": [Drawn.of(dead).token()],
                "confirm": "yes",
                "payload": text,
            },
        )
        now = row(dead.id)
        if response.status_code == 200:  # the confirmation page again, naming the problem
            problem = re.search(r'<p class="errornote" id="problem">(.*?)</p>', response.text, re.S)
            assert problem, response.text[:2000]
            message = html.unescape(problem.group(1))
            assert re.match(r"payload(\..+?)?: ", message, re.S), message
            assert ok is not True, f"refused a valid edit {text!r}: {message}"
            assert (now.status, now.payload, now.updated_at) == (
                "failed",
                first.payload,
                first.updated_at,
            )
            assert trail(dead.id) == ["work.dead_lettered"]
            if rows(ctx) != before:
                summary.count(SUITE, "left")
            assert rows(ctx) == before
            summary.count(SUITE, "refused")
            return
        assert response.status_code == 302, (response.status_code, response.content[:500])
        assert ok is not False, f"saved an invalid edit {text!r}"
        assert (now.status, now.attempts) == ("pending", 0)
        assert same_json(
            FREE.schema.model_validate(now.payload).model_dump(),
            FREE.schema.model_validate(meant).model_dump(),
        )
        assert trail(dead.id) == ["work.dead_lettered", "work.requeued_edited"]
        summary.count(SUITE, "stored")

    check()
    _property_ran("payload edit")


# -- the django.tasks backend's arguments ---------------------------------------------------------

# Anything a caller may pass a task: JSON values, what Django turns into JSON (tuples, UTF-8
# bytes), what it cannot (sets, dates, objects, keys that are tuples), what jsonb cannot hold
# (NaN, NUL, lone surrogates), and values too large or nested too deep.
task_scalars = st.one_of(
    scalars,
    st.binary(max_size=6),
    st.sampled_from([object(), {1, 2}, datetime(2024, 1, 1), uuid.UUID(int=7), 1j, type]),
)
task_values = st.recursive(
    task_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(
            st.one_of(texts, st.integers(), st.booleans(), st.none(), st.tuples(st.integers())),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=10,
)
task_args = st.one_of(
    st.lists(task_values, max_size=3),
    st.lists(st.text(min_size=LIMIT // 3, max_size=LIMIT // 2), min_size=1, max_size=3),
    st.integers(min_value=60, max_value=70).map(lambda n: [_nested(n)]),
)
task_kwargs = st.dictionaries(
    st.one_of(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), texts),
    task_values,
    max_size=3,
)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def task_problems(args: list[Any], kwargs: dict[str, Any]) -> set[str]:
    """The arguments the documented rules refuse (``args[0]``, ``kwargs['k']``): a JSON value
    (tuples as lists, UTF-8 bytes as text), storable (no NaN or infinity, NUL or lone
    surrogate), keys of str, int, float, bool or None, lists and dicts at most
    ``values.MAX_DEPTH`` (62) levels deep; a keyword's name is stored too, so it must be
    storable text."""

    def bad(value: Any, depth: int) -> bool:
        if isinstance(value, dict | list | tuple) and depth >= task_values_module.MAX_DEPTH:
            return True
        if isinstance(value, str):
            return not _storable_text(value)
        if isinstance(value, float):
            return not math.isfinite(value)
        if value is None or isinstance(value, bool | int):
            return False
        if isinstance(value, bytes):
            try:
                return bad(value.decode("utf-8"), depth)
            except UnicodeDecodeError:
                return True
        if isinstance(value, dict):
            return any(
                not isinstance(k, str | int | float | bool | type(None))
                or bad(k, depth + 1)
                or bad(v, depth + 1)
                for k, v in value.items()
            )
        if isinstance(value, list | tuple):
            return any(bad(v, depth + 1) for v in value)
        return True

    found = {f"args[{i}]" for i, v in enumerate(args) if bad(v, 0)}
    found |= {f"kwargs[{k!r}]" for k, v in kwargs.items() if not _storable_text(k) or bad(v, 0)}
    return found


def _as_json(value: Any) -> Any:
    """What a task's argument becomes in JSON (tuples as lists, bytes as text)."""

    def plain(v: Any) -> Any:
        if isinstance(v, bytes):
            return v.decode("utf-8")
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    return json.loads(json.dumps(plain(value)))


@queue_settings(MAX_PAYLOAD_BYTES=LIMIT)
def test_the_task_backend_enqueues_json_or_refuses_naming_the_argument(ctx: OpContext) -> None:
    from tenancy.current import using_context
    from tests import tasks
    from workqueue.models import WorkItem

    @FAST
    @given(args=task_args, kwargs=task_kwargs)
    def check(args: list[Any], kwargs: dict[str, Any]) -> None:
        _tally("task arguments")
        problems = task_problems(args, kwargs)
        with callers_transaction(), using_context(ctx):
            before = rows(ctx)
            try:
                result = tasks.add.enqueue(*args, **kwargs)
            except (TypeError, ValueError, InvalidPayload) as exc:
                message = str(exc)
                after = rows(ctx)
                if after != before:
                    summary.count(SUITE, "left")
                assert after == before, f"a refused enqueue left rows: {before} -> {after}"
                _still_usable(ctx)
                if isinstance(exc, InvalidPayload):
                    # The whole call's JSON over the size limit: the payload is at fault.
                    assert re.match(r"payload: \d+ bytes .* allowed", message), message
                    assert not problems, f"{sorted(problems)} refused as a size: {message}"
                else:
                    blamed = re.match(r"(args\[\d+\]|kwargs\[.*?\])[\[ :]", message, re.S)
                    assert blamed, f"the error names no argument: {message!r}"
                    assert any(message.startswith(p) for p in problems), (
                        f"{message!r}: the rules find {sorted(problems)} wrong"
                    )
                summary.count(SUITE, "refused")
                return
            assert not problems, f"enqueued although {sorted(problems)} break the rules"
            with tenant_scope(ctx.org_id):
                stored = WorkItem.objects.get(pk=result.id)
            assert (stored.org_id, stored.created_by, stored.kind) == (
                ctx.org_id,
                ctx.user_id,
                "DJANGO_TASK",
            )
            assert same_json(stored.payload["args"], _as_json(list(args)))
            assert same_json(stored.payload["kwargs"], _as_json(kwargs))
            assert rows(ctx) == (before[0] + 1, before[1], before[2])
            summary.count(SUITE, "stored")

    check()
    _property_ran("task arguments")


def test_the_strategies_reach_both_sides(ctx: OpContext) -> None:
    """A property that only ever refused (or only stored) would prove little."""
    counts = summary.COUNTS.get(SUITE)
    if not counts or counts["properties"] < 3:
        pytest.skip("run with the properties above")
    assert counts["stored"] > 30 and counts["refused"] > 30, dict(counts)
