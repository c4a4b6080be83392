"""enqueue: put work on the queue for a tenant, never overwriting what is already there.

Everything a caller gives is validated first (``workqueue.inputs``, the kind's schema): an
invalid item stores nothing and raises ``InvalidPayload`` naming the field, before any
statement runs. The queue stamps the status, the attempts and the author (the context's user,
whatever the caller sends), and clears every claim field.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from functools import cache
from itertools import pairwise
from typing import Any, NamedTuple

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.inputs import (
    KEY_MAX,
    check_id,
    check_lane,
    check_max_attempts,
    check_priority,
    check_text,
    check_traceparent,
    check_when,
)
from workqueue.kinds import get_kind, validate_payload
from workqueue.models import Status, WorkItem, new_item_id
from workqueue.rows import items_from_rows, items_of
from workqueue.signals import send_enqueued, work_enqueued
from wqcore.arrays import IntArray, SmallIntArray, TextArray, TimestamptzArray, UUIDArray
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, Tenant, TenantBatches, arun, run
from wqcore.tracing import current_traceparent


class Outcome(StrEnum):
    # A new row was written.
    INSERTED = "inserted"
    # A row with this id existed; it is returned untouched.
    ID_EXISTS = "id_exists"
    # A row (with another id) held this idempotency key; it is returned untouched.
    KEY_EXISTS = "key_exists"


class NewItem(NamedTuple):
    """One item to enqueue. The queue stamps status, attempts, author, and clears claim fields.

    A named tuple: bulk producers build thousands, and a frozen dataclass costs more to make.
    """

    kind: str
    payload: dict[str, Any]
    id: uuid.UUID | str | None = None
    idempotency_key: str | None = None
    lane: str | None = None
    priority: int = 0
    available_at: datetime | None = None
    # None: the kind's. A producer with its own policy (the django.tasks backend) names it.
    max_attempts: int | None = None
    # At most one item of the tenant with this key runs at once; the others wait in order.
    concurrency_key: str | None = None


class Author(NamedTuple):
    """Who an item is enqueued for and by whom: stamped by the queue, never by the caller."""

    org_id: uuid.UUID
    created_by: str
    request_id: uuid.UUID | None
    traceparent: str | None

    @classmethod
    def of(cls, ctx: OpContext) -> Author:
        return cls(
            ctx.org_id,
            ctx.user_id,
            ctx.caused_by_request_id or ctx.request_id,
            check_traceparent(ctx.rctx.traceparent or current_traceparent()),
        )


class Row(NamedTuple):
    """One validated item, as its columns."""

    id: uuid.UUID
    kind: str
    lane: str
    payload: str  # JSON text, as validated
    idempotency_key: str | None
    priority: int
    available_at: datetime | None
    max_attempts: int
    concurrency_key: str | None


class EnqueueParams(NamedTuple):
    org_id: uuid.UUID
    id: uuid.UUID
    kind: str
    lane: str
    payload: str
    idempotency_key: str | None
    priority: int
    available_at: datetime | None
    max_attempts: int
    concurrency_key: str | None
    created_by: str
    request_id: uuid.UUID | None
    traceparent: str | None


class EnqueueManyParams(NamedTuple):
    org_id: uuid.UUID
    # The rows, one array per column (element n of each is row n): sent as binary arrays
    # (wqcore.arrays), which the server reads without parsing a document.
    ids: UUIDArray
    kinds: TextArray
    lanes: TextArray
    payloads: TextArray  # JSON text, as validated
    idempotency_keys: TextArray
    concurrency_keys: TextArray
    priorities: SmallIntArray
    available_ats: TimestamptzArray
    max_attempts: IntArray
    created_by: str
    request_id: uuid.UUID | None
    traceparent: str | None
    # The lane announced on work_available ("*" when the batch spans lanes).
    notice: str


class EnqueueRowsParams(NamedTuple):
    """What the shared source of the bulk inserts names (never run on its own)."""

    org_id: uuid.UUID
    ids: UUIDArray
    kinds: TextArray
    lanes: TextArray
    payloads: TextArray
    idempotency_keys: TextArray
    concurrency_keys: TextArray
    priorities: SmallIntArray
    available_ats: TimestamptzArray
    max_attempts: IntArray
    created_by: str
    request_id: uuid.UUID | None
    traceparent: str | None


class ReadItemsParams(NamedTuple):
    ids: list[uuid.UUID]
    keys: list[str]


class TakenIdsParams(NamedTuple):
    org_id: uuid.UUID
    ids: list[uuid.UUID]


ENQUEUE = Statement("enqueue", EnqueueParams, SQL_DIR, names_tenant=True)
_ENQUEUE_MANY_ROWS = Statement("enqueue_many_rows", EnqueueRowsParams, SQL_DIR)
ENQUEUE_MANY = Statement(
    "enqueue_many", EnqueueManyParams, SQL_DIR, names_tenant=True, includes=(_ENQUEUE_MANY_ROWS,)
)
ENQUEUE_MANY_NEW = Statement(
    "enqueue_many_new",
    EnqueueManyParams,
    SQL_DIR,
    names_tenant=True,
    includes=(_ENQUEUE_MANY_ROWS,),
)
READ_ITEMS = Statement("read_items", ReadItemsParams, SQL_DIR)
TAKEN_IDS = Statement("taken_ids", TakenIdsParams, SQL_DIR)


def validated(new: NewItem, where: str = "") -> Row:
    """The validated columns of one item, or ``InvalidPayload`` saying which field and why."""
    if not isinstance(new, NewItem):
        # The item itself is what is wrong: ``items[3]: must be ...``, not a field of it.
        where = where.rstrip(".") or "item"
        raise InvalidPayload(f"{where}: must be a NewItem, got {type(new).__name__}")
    try:
        kind = get_kind(new.kind)
        payload = validate_payload(kind, new.payload)
        key, ckey = new.idempotency_key, new.concurrency_key
        attempts = new.max_attempts
        return Row(
            id=check_id(new.id) if new.id is not None else new_item_id(),
            kind=kind.name,
            lane=kind.lane if new.lane is None else check_lane(new.lane),
            payload=payload,
            idempotency_key=None if key is None else check_text("idempotency_key", key, KEY_MAX),
            priority=check_priority(new.priority),
            available_at=check_when(new.available_at),
            max_attempts=kind.max_attempts if attempts is None else check_max_attempts(attempts),
            concurrency_key=(
                None if ckey is None else check_text("concurrency_key", ckey, KEY_MAX)
            ),
        )
    except InvalidPayload as exc:
        if not where:
            raise
        raise InvalidPayload(f"{where}{exc}") from None


# -- building the returned item ---------------------------------------------------------------


@cache
def _attnames() -> tuple[str, ...]:
    return tuple(f.attname for f in WorkItem._meta.concrete_fields)


def _inserted(author: Author, row: Row, stamped: Sequence[Any]) -> WorkItem:
    """The item as the insert stored it, from what the caller sent and what the server stamped
    (the statement returns only those, not the whole row)."""
    item_id, available_at, created_at = stamped[:3]
    values = {
        "id": item_id,
        "org_id": author.org_id,
        "kind": row.kind,
        "lane": row.lane,
        "status": Status.PENDING.value,
        "payload": row.payload,  # JSON text: items_from_rows reads it
        "idempotency_key": row.idempotency_key,
        "concurrency_key": row.concurrency_key,
        "priority": row.priority,
        "available_at": available_at,
        "claimed_by": None,
        "claimed_at": None,
        "claim_token": None,
        "lease_expires_at": None,
        "attempts": 0,
        "max_attempts": row.max_attempts,
        "last_error": "",
        "created_by": author.created_by,
        "updated_by": author.created_by,
        "request_id": author.request_id,
        "traceparent": author.traceparent,
        "cancel_requested_at": None,
        "created_at": created_at,
        "updated_at": created_at,
    }
    names = _attnames()
    return items_from_rows("default", names, [[values[name] for name in names]])[0]


def _read_back(author: Author, rows: Sequence[Row]) -> Plan:
    """The rows that already held the given ids or keys, by id and by key."""
    found: Rows = yield Tenant(
        author.org_id,
        READ_ITEMS,
        ReadItemsParams(
            ids=[r.id for r in rows],
            keys=[r.idempotency_key for r in rows if r.idempotency_key],
        ),
    )
    by: dict[uuid.UUID | str, WorkItem] = {}
    for item in items_of(found):
        by[item.id] = item
        if item.idempotency_key:
            by[item.idempotency_key] = item
    return by


def _outcome(row: Row, by: dict[uuid.UUID | str, WorkItem]) -> tuple[WorkItem, Outcome]:
    if row.id in by:
        return by[row.id], Outcome.ID_EXISTS
    if row.idempotency_key in by:
        return by[row.idempotency_key], Outcome.KEY_EXISTS
    # The id is held by another tenant's row: nothing was written and nothing can be shown.
    raise Conflict(f"work item id {row.id} is taken")


# -- one item -----------------------------------------------------------------------------------


def enqueue_plan(author: Author, row: Row) -> Plan:
    """Insert ``row`` for ``author``; an id or key that exists is read back, untouched."""
    # Positional, in EnqueueParams' order: the row's columns, then the author's stamps.
    params = EnqueueParams(author.org_id, *row, *author[1:])
    inserted: Rows = yield Tenant(author.org_id, ENQUEUE, params)
    if inserted.rows:
        return _inserted(author, row, inserted.rows[0]), Outcome.INSERTED
    by = yield from _read_back(author, [row])
    return _outcome(row, by)


def enqueue(
    ctx: OpContext,
    kind: str,
    payload: dict[str, Any],
    *,
    id: uuid.UUID | str | None = None,
    idempotency_key: str | None = None,
    lane: str | None = None,
    priority: int = 0,
    available_at: datetime | None = None,
    max_attempts: int | None = None,
    concurrency_key: str | None = None,
) -> tuple[WorkItem, Outcome]:
    """Insert one pending item in the context's tenant, by the context's user, and announce it
    on ``work_available`` (delivered when the enqueue commits).

    One statement and one round trip: outside a transaction it is its own; inside the caller's
    ``atomic()`` (or a view's tenant scope) it joins it, so a rollback takes the item back. An
    id or idempotency key that already exists inserts nothing; that row is returned untouched,
    so a retried enqueue never resets a claim. ``available_at`` defaults to the database's
    ``now()``; ``max_attempts`` to the kind's. With a ``concurrency_key``, at most one item of
    the tenant with that key is claimed at any moment; the others wait, first in claim order
    (priority, then age) next.
    """
    row = validated(
        NewItem(
            kind,
            payload,
            id,
            idempotency_key,
            lane,
            priority,
            available_at,
            max_attempts,
            concurrency_key,
        )
    )
    item, outcome = run(enqueue_plan(Author.of(ctx), row))
    if outcome == Outcome.INSERTED:
        send_enqueued([(item.id, item.kind, item.lane)])
    return item, outcome


async def aenqueue(
    ctx: OpContext,
    kind: str,
    payload: dict[str, Any],
    *,
    id: uuid.UUID | str | None = None,
    idempotency_key: str | None = None,
    lane: str | None = None,
    priority: int = 0,
    available_at: datetime | None = None,
    max_attempts: int | None = None,
    concurrency_key: str | None = None,
) -> tuple[WorkItem, Outcome]:
    """Async version of ``enqueue``, on the store's own connection: it commits on its own and
    joins no transaction of the caller's (use ``enqueue`` or ``outbox.emit`` for that)."""
    row = validated(
        NewItem(
            kind,
            payload,
            id,
            idempotency_key,
            lane,
            priority,
            available_at,
            max_attempts,
            concurrency_key,
        )
    )
    return await arun(enqueue_plan(Author.of(ctx), row))


# -- many items ---------------------------------------------------------------------------------


def _many_params(author: Author, rows: Sequence[Row]) -> EnqueueManyParams:
    lanes = [r.lane for r in rows]
    return EnqueueManyParams(
        author.org_id,
        UUIDArray([r.id for r in rows]),
        TextArray([r.kind for r in rows]),
        TextArray(lanes),
        TextArray([r.payload for r in rows]),
        TextArray([r.idempotency_key for r in rows]),
        TextArray([r.concurrency_key for r in rows]),
        SmallIntArray([r.priority for r in rows]),
        TimestamptzArray([r.available_at for r in rows]),
        IntArray([r.max_attempts for r in rows]),
        *author[1:],
        notice=lanes[0] if lanes.count(lanes[0]) == len(lanes) else "*",
    )


def enqueue_many_plan(
    author: Author,
    rows: Sequence[Row],
    given_ids: Sequence[uuid.UUID] = (),
) -> Plan:
    """Insert ``rows`` in one statement; returns each row's (id, outcome), in input order.

    A repeated id or key within the batch is inserted once: the later ones are reported as
    ``ID_EXISTS`` or ``KEY_EXISTS`` of the first, as a second call would report them. Ids the
    caller chose (``given_ids``) are first checked against other tenants' items: one that
    another tenant holds refuses the whole batch (``Conflict``) before anything is stored.
    """
    if given_ids:
        taken: Rows = yield System(TAKEN_IDS, TakenIdsParams(author.org_id, list(given_ids)))
        if taken.rows:
            raise Conflict(f"work item id {taken.rows[0][0]} is taken: nothing was stored")
    first_of: dict[uuid.UUID | str, int] = {}
    repeats: dict[int, tuple[int, Outcome]] = {}
    unique: list[Row] = []
    for i, row in enumerate(rows):
        if row.id in first_of:
            repeats[i] = (first_of[row.id], Outcome.ID_EXISTS)
            continue
        if row.idempotency_key is not None and row.idempotency_key in first_of:
            repeats[i] = (first_of[row.idempotency_key], Outcome.KEY_EXISTS)
            continue
        first_of[row.id] = i
        if row.idempotency_key is not None:
            first_of[row.idempotency_key] = i
        unique.append(row)
    params = _many_params(author, unique)
    if not given_ids and all(row.idempotency_key is None for row in unique):
        # Every id was minted here (time-ordered, random): no row can meet another, so the
        # insert skips the per-row conflict check and returns no rows.
        yield Tenant(author.org_id, ENQUEUE_MANY_NEW, params)
        return [(row.id, Outcome.INSERTED) for row in rows]
    inserted: Rows = yield Tenant(author.org_id, ENQUEUE_MANY, params)
    new_ids = set(inserted.column(0))
    missing = [r for r in unique if r.id not in new_ids]
    existing = (yield from _read_back(author, missing)) if missing else {}
    results: list[tuple[uuid.UUID, Outcome]] = []
    for i, row in enumerate(rows):
        if i in repeats:
            first, outcome = repeats[i]
            results.append((results[first][0], outcome))
        elif row.id in new_ids:
            results.append((row.id, Outcome.INSERTED))
        else:
            item, outcome = _outcome(row, existing)
            results.append((item.id, outcome))
    return results


# A batch at least this large is validated with Python's cyclic collector paused.
_PAUSE_COLLECTOR_FROM = 100


@contextmanager
def _collector_paused(n: int) -> Iterator[None]:
    """Pause Python's cyclic collector while a batch of ``n`` items is validated, written out
    and inserted (milliseconds): every object made meanwhile stays alive until the insert
    returns, so a collection then walks them for nothing and promotes them, which brings the
    next full collection (a walk of the whole process) sooner. Reference counting frees them
    afterwards either way. A caller that paused the collector itself keeps it paused."""
    pause = n >= _PAUSE_COLLECTOR_FROM and gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause:
            gc.enable()


def _rows(items: Sequence[NewItem], first: int = 0) -> tuple[list[Row], list[uuid.UUID]]:
    """The validated rows, and the ids among them the caller chose (``first``: the index of
    ``items[0]`` in the caller's list, for the error that names an item)."""
    rows: list[Row] = []
    for i, new in enumerate(items, start=first):
        try:
            rows.append(validated(new))
        except InvalidPayload:
            validated(new, f"items[{i}].")  # raises again, naming the item
            raise
    given = [row.id for row, new in zip(rows, items, strict=True) if new.id is not None]
    return rows, given


# A batch of fresh items (no id, no key) larger than this is inserted this many at a time,
# the first chunk smaller, so the server starts inserting while the rest is validated. 150:
# a batch of 1,000 in 10.2-10.3 ms against 10.8-11.1 with chunks of 250 (issue 22, rounds
# shuffled; 100 no faster).
BATCH_CHUNK = 150
FIRST_CHUNK = 50


def chunk_bounds(n: int) -> list[tuple[int, int]]:
    """Where a fresh batch of ``n`` items is cut: ``FIRST_CHUNK``, then ``BATCH_CHUNK`` at a
    time, as (start, end) pairs."""
    return list(pairwise([0, *range(FIRST_CHUNK, n, BATCH_CHUNK), n]))


def _fresh(items: Sequence[NewItem]) -> bool:
    """Whether every item leaves its id and key to us (nothing in the batch can collide)."""
    return all(
        isinstance(new, NewItem) and new.id is None and new.idempotency_key is None for new in items
    )


def fresh_batches_plan(author: Author, items: Sequence[NewItem]) -> Plan:
    """Insert ``items``, all fresh, ``BATCH_CHUNK`` at a time in one transaction: a chunk is
    validated, and its insert sent, while the server still inserts the chunk before it. An
    invalid item anywhere refuses the whole batch, and nothing is stored."""
    ids: list[uuid.UUID] = []

    def chunks() -> Iterator[EnqueueManyParams]:
        for start, end in chunk_bounds(len(items)):
            rows, _ = _rows(items[start:end], first=start)
            ids.extend(row.id for row in rows)
            yield _many_params(author, rows)

    yield TenantBatches(author.org_id, ENQUEUE_MANY_NEW, chunks())
    return [(item_id, Outcome.INSERTED) for item_id in ids]


def _many_plan(author: Author, items: Sequence[NewItem]) -> Plan | None:
    """The plan for ``items`` (None when there are none): validated all first, unless they are
    many and fresh, when validation overlaps the inserts."""
    if len(items) > BATCH_CHUNK and _fresh(items):
        return fresh_batches_plan(author, items)
    rows, given = _rows(items)
    return enqueue_many_plan(author, rows, given) if rows else None


def enqueue_many(ctx: OpContext, items: Sequence[NewItem]) -> list[tuple[uuid.UUID, Outcome]]:
    """Insert many items in one statement, with ``enqueue``'s rules; returns, in input order,
    each item's id (for ``KEY_EXISTS``, the id of the row that holds the key) and outcome.

    Every item is validated first: one invalid item refuses the whole batch, naming its index,
    and nothing is stored. Ids, not rows, come back: a bulk producer pays for reading back
    only what collided.
    """
    with _collector_paused(len(items)):
        plan = _many_plan(Author.of(ctx), items)
        outcomes: list[tuple[uuid.UUID, Outcome]] = run(plan) if plan is not None else []
    if work_enqueued.has_listeners(WorkItem):
        send_enqueued(
            [
                (id_, new.kind, new.lane or get_kind(new.kind).lane)
                for new, (id_, outcome) in zip(items, outcomes, strict=True)
                if outcome == Outcome.INSERTED
            ]
        )
    return outcomes


async def aenqueue_many(
    ctx: OpContext, items: Sequence[NewItem]
) -> list[tuple[uuid.UUID, Outcome]]:
    """Async version of ``enqueue_many`` (on the store's own connection, as ``aenqueue``)."""
    with _collector_paused(len(items)):
        plan = _many_plan(Author.of(ctx), items)
        return await arun(plan) if plan is not None else []


# -- from the outbox ----------------------------------------------------------------------------


class Relayed(NamedTuple):
    """What the outbox relay hands over: one ``work.<KIND>`` row, as written by ``emit``."""

    id: uuid.UUID
    kind: str  # the work kind, after "work."
    payload: dict[str, Any]
    actor: str
    request_id: uuid.UUID | None
    traceparent: str | None


def enqueue_relayed(org_id: uuid.UUID, row: Relayed) -> tuple[WorkItem, Outcome]:
    """Enqueue the work an outbox row asks for, in ``org_id``: the row's id is the item's id
    and its idempotency key (a second relay of the row meets its own item: ``ID_EXISTS``), the
    row's actor is the author, its request id and traceparent carry over, and the payload's
    ``lane`` entry (default: the kind's lane) becomes the lane and is left out of the payload, as
    does its ``concurrency_key`` entry (the item's key).

    Takes no context: the relay acts for the row's author, whose context wrote the row; the
    row's tenant is the tenant of the insert, under row-level security like every enqueue.
    """
    payload = dict(row.payload)
    lane = payload.pop("lane", None)
    ckey = payload.pop("concurrency_key", None)
    new = NewItem(
        row.kind,
        payload,
        id=row.id,
        idempotency_key=str(row.id),
        lane=lane,
        concurrency_key=ckey,
    )
    author = Author(org_id, row.actor, row.request_id, check_traceparent(row.traceparent))
    return run(enqueue_plan(author, validated(new)))
