"""enqueue_many: put many items on the queue in one statement, with ``enqueue``'s rules.

A batch whose every id and key is left to the queue (fresh) cannot meet another row: it is
inserted a chunk at a time in one transaction, each chunk validated while the server inserts
the one before it. Any other batch is validated whole, then inserted in one statement that
reports what it met.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.columns import (
    Author,
    EnqueueManyParams,
    EnqueueRowsParams,
    NewItem,
    Row,
    many_insert_parts,
    many_params,
    validated,
)
from workqueue.enqueue import TAKEN_IDS, Outcome, TakenIdsParams, existing, read_back
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.kinds import get_kind
from workqueue.models import WorkItem
from workqueue.ready import READY_ROWS
from workqueue.signals import send_enqueued, work_enqueued
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, Tenant, TenantBatches, transition

# The insert both bulk statements share (never run on its own).
_ENQUEUE_MANY_ROWS = Statement(
    "enqueue_many_rows", EnqueueRowsParams, SQL_DIR, build_parts=many_insert_parts
)
ENQUEUE_MANY = Statement(
    "enqueue_many",
    EnqueueManyParams,
    SQL_DIR,
    names_tenant=True,
    includes=(_ENQUEUE_MANY_ROWS, READY_ROWS),
)
ENQUEUE_MANY_NEW = Statement(
    "enqueue_many_new",
    EnqueueManyParams,
    SQL_DIR,
    names_tenant=True,
    includes=(_ENQUEUE_MANY_ROWS, READY_ROWS),
)

Outcomes = list[tuple[uuid.UUID, Outcome]]


def _first_of_each(rows: Sequence[Row]) -> tuple[list[Row], dict[int, tuple[int, Outcome]]]:
    """The rows to insert (the first with each id and key), and each repeat's index with the
    index of the row it repeats and how (its id, or its key)."""
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
    return unique, repeats


def enqueue_many_plan(
    author: Author,
    rows: Sequence[Row],
    given_ids: Sequence[uuid.UUID] = (),
) -> Plan[Outcomes]:
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
    unique, repeats = _first_of_each(rows)
    params = many_params(author, unique)
    if not given_ids and all(row.idempotency_key is None for row in unique):
        # Every id was minted here (time-ordered, random): no row can meet another, so the
        # insert skips the per-row conflict check and returns no rows.
        yield Tenant(author.org_id, ENQUEUE_MANY_NEW, params)
        return [(row.id, Outcome.INSERTED) for row in rows]
    inserted: Rows = yield Tenant(author.org_id, ENQUEUE_MANY, params)
    new_ids = set(inserted.column(0))
    missing = [r for r in unique if r.id not in new_ids]
    found = (yield from read_back(author, missing)) if missing else {}
    results: Outcomes = []
    for i, row in enumerate(rows):
        if i in repeats:
            first, outcome = repeats[i]
            results.append((results[first][0], outcome))
        elif row.id in new_ids:
            results.append((row.id, Outcome.INSERTED))
        else:
            item, outcome = existing(row, found)
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


def _rows(items: Sequence[NewItem], first: int = 0) -> list[Row]:
    """The validated rows (``first``: the index of ``items[0]`` in the caller's list, for the
    error that names an item)."""
    rows: list[Row] = []
    for i, new in enumerate(items, start=first):
        try:
            rows.append(validated(new))
        except InvalidPayload:
            validated(new, f"items[{i}].")  # raises again, naming the item
            raise
    return rows


# A batch of fresh items (no id, no key) larger than this is inserted this many at a time,
# the first chunk smaller, so the server starts inserting while the rest is validated. The
# size is what the bulk enqueue benchmark found fastest (bench/enqueue_split.py): larger
# chunks start the server later, smaller ones cost more statements.
BATCH_CHUNK = 150
FIRST_CHUNK = 50


def chunk_bounds(n: int) -> list[tuple[int, int]]:
    """Where a fresh batch of ``n`` items is cut: ``FIRST_CHUNK``, then ``BATCH_CHUNK`` at a
    time, as (start, end) pairs."""
    return list(pairwise([0, *range(FIRST_CHUNK, n, BATCH_CHUNK), n]))


def _fresh(items: Sequence[object]) -> bool:
    """Whether every item is a NewItem that leaves its id and key to us (nothing in the batch
    can collide)."""
    return all(
        isinstance(new, NewItem) and new.id is None and new.idempotency_key is None for new in items
    )


def fresh_batches_plan(author: Author, items: Sequence[NewItem]) -> Plan[Outcomes]:
    """Insert ``items``, all fresh, ``BATCH_CHUNK`` at a time in one transaction: a chunk is
    validated, and its insert sent, while the server still inserts the chunk before it. An
    invalid item anywhere refuses the whole batch, and nothing is stored."""
    ids: list[uuid.UUID] = []

    def chunks() -> Iterator[Any]:
        for start, end in chunk_bounds(len(items)):
            rows = _rows(items[start:end], first=start)
            ids.extend(row.id for row in rows)
            yield many_params(author, rows)

    yield TenantBatches(author.org_id, ENQUEUE_MANY_NEW, chunks())
    return [(item_id, Outcome.INSERTED) for item_id in ids]


@transition
def enqueue_many(ctx: OpContext, items: Sequence[NewItem]) -> Plan[Outcomes]:
    """Insert many items in one statement, with ``enqueue``'s rules; returns, in input order,
    each item's id (for ``KEY_EXISTS``, the id of the row that holds the key) and outcome.

    Every item is validated first (unless many and fresh: then chunk by chunk, overlapping the
    inserts): one invalid item refuses the whole batch, naming its index, and nothing is
    stored. Ids, not rows, come back: a bulk producer pays for reading back only what
    collided. ``aenqueue_many`` commits on its own, as ``aenqueue``.
    """
    with _collector_paused(len(items)):
        author = Author.of(ctx)
        if len(items) > BATCH_CHUNK and _fresh(items):
            return (yield from fresh_batches_plan(author, items))
        rows = _rows(items)
        if not rows:
            return []
        given = [row.id for row, new in zip(rows, items, strict=True) if new.id is not None]
        return (yield from enqueue_many_plan(author, rows, given))


@enqueue_many.after_sync
def _announce(outcomes: Outcomes, ctx: OpContext, items: Sequence[NewItem]) -> None:
    if work_enqueued.has_listeners(WorkItem):
        send_enqueued(
            [
                (id_, new.kind, new.lane or get_kind(new.kind).lane)
                for new, (id_, outcome) in zip(items, outcomes, strict=True)
                if outcome == Outcome.INSERTED
            ]
        )


aenqueue_many = enqueue_many.aio
