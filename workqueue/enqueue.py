"""enqueue: put work on the queue for a tenant, never overwriting what is already there.

Everything a caller gives is validated first (``workqueue.columns``, the kind's schema): an
invalid item stores nothing and raises ``InvalidPayload`` naming the field, before any
statement runs. The queue stamps the status, the attempts and the author (the context's user,
whatever the caller sends), and clears every claim field. Many items at once:
``workqueue.enqueue_many``.
"""

from __future__ import annotations

import inspect
import typing
import uuid
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any, Concatenate, NamedTuple

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.columns import (
    Author,
    EnqueueParams,
    NewItem,
    Row,
    inserted_item,
    one_insert_parts,
    one_params,
    validated,
)
from workqueue.exceptions import Conflict
from workqueue.inputs import check_traceparent
from workqueue.models import WorkItem
from workqueue.ready import READY_ROWS
from workqueue.rows import items_of
from workqueue.signals import send_enqueued
from wqcore.conf import wq_settings
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Tenant, transition

__all__ = ["Author", "NewItem", "Outcome", "Relayed", "enqueue", "enqueue_relayed", "validated"]


class Outcome(StrEnum):
    # A new row was written.
    INSERTED = "inserted"
    # A row with this id existed; it is returned untouched.
    ID_EXISTS = "id_exists"
    # A row (with another id) held this idempotency key; it is returned untouched.
    KEY_EXISTS = "key_exists"


class ReadItemsParams(NamedTuple):
    ids: list[uuid.UUID]
    keys: list[str]


class ReadyRowParams(NamedTuple):
    org_id: uuid.UUID
    id: uuid.UUID


class TakenIdsParams(NamedTuple):
    org_id: uuid.UUID
    ids: list[uuid.UUID]


ENQUEUE = Statement(
    "enqueue",
    EnqueueParams,
    SQL_DIR,
    names_tenant=True,
    includes=(READY_ROWS,),
    build_parts=one_insert_parts,
)
# The Citus forms (WORKQUEUE["CITUS"]): the item, then its ready row, each a statement.
ENQUEUE_CITUS = Statement("enqueue_citus", EnqueueParams, SQL_DIR, build_parts=one_insert_parts)
READY_ROW_CITUS = Statement("ready_row_citus", ReadyRowParams, SQL_DIR)
READ_ITEMS = Statement("read_items", ReadItemsParams, SQL_DIR)
TAKEN_IDS = Statement("taken_ids", TakenIdsParams, SQL_DIR)


def read_back(author: Author, rows: Sequence[Row]) -> Plan[dict[uuid.UUID | str, WorkItem]]:
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


def existing(row: Row, by: dict[uuid.UUID | str, WorkItem]) -> tuple[WorkItem, Outcome]:
    """The item that kept ``row`` from being inserted, and why."""
    if row.id in by:
        return by[row.id], Outcome.ID_EXISTS
    if row.idempotency_key in by:
        return by[row.idempotency_key], Outcome.KEY_EXISTS
    # The id is held by another tenant's row: nothing was written and nothing can be shown.
    raise Conflict(f"work item id {row.id} is taken")


def insert_one(author: Author, row: Row) -> Plan[tuple[WorkItem, Outcome]]:
    """Insert ``row`` for ``author``; an id or key that exists is read back, untouched."""
    if wq_settings.CITUS:
        inserted = yield Tenant(author.org_id, ENQUEUE_CITUS, one_params(author, row))
        if inserted.rows:
            yield Tenant(author.org_id, READY_ROW_CITUS, ReadyRowParams(author.org_id, row.id))
    else:
        inserted = yield Tenant(author.org_id, ENQUEUE, one_params(author, row))
    if inserted.rows:
        return inserted_item(author, row, inserted.rows[0]), Outcome.INSERTED
    by = yield from read_back(author, [row])
    return existing(row, by)


def _plain(parameter: inspect.Parameter) -> inspect.Parameter:
    """``parameter`` with its type as a reader knows it (``Annotated``'s extras left out)."""
    if typing.get_origin(parameter.annotation) is not typing.Annotated:
        return parameter
    return parameter.replace(annotation=typing.get_args(parameter.annotation)[0])


def _takes_ctx_then[**Q, R](
    shape: Callable[Q, Any],
) -> Callable[[Callable[..., R]], Callable[Concatenate[OpContext, Q], R]]:
    """Say that a function of ``(ctx, *args, **kwargs)`` takes a context, then what ``shape``
    takes, to the type checker and to ``inspect.signature`` (it changes no call)."""

    def typed(fn: Callable[..., R]) -> Callable[Concatenate[OpContext, Q], R]:
        ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        shaped = [_plain(p) for p in inspect.signature(shape).parameters.values()]
        vars(fn)["__signature__"] = inspect.Signature([ctx, *shaped])
        return fn

    return typed


@transition
@_takes_ctx_then(NewItem)
def enqueue(ctx: OpContext, *item: Any, **fields: Any) -> Plan[tuple[WorkItem, Outcome]]:
    """Insert one pending item (``NewItem``'s fields: ``kind``, ``payload``, then ``id``,
    ``idempotency_key``, ``lane``, ``priority``, ``available_at``, ``max_attempts``,
    ``concurrency_key``, ``rate_key``) in the context's tenant, by the context's user, and
    announce it on ``work_available`` (delivered when the enqueue commits).

    One statement and one round trip: outside a transaction it is its own; inside the caller's
    ``atomic()`` (or a view's tenant scope) it joins it, so a rollback takes the item back. An
    id or idempotency key that already exists inserts nothing; that row is returned untouched,
    so a retried enqueue never resets a claim. ``available_at`` defaults to the database's
    ``now()``; ``max_attempts`` to the kind's. With a ``concurrency_key``, at most one item of
    the tenant with that key is claimed at any moment; the others wait, first in claim order
    (priority, then age) next. A ``rate_key`` is what a rate limit of scope ``key`` counts the
    item under (``rate_limits.py``). ``aenqueue`` commits on its own and joins no transaction of the
    caller's (use ``enqueue`` or ``outbox.emit`` for that).
    """
    row = validated(NewItem(*item, **fields))
    return (yield from insert_one(Author.of(ctx), row))


@enqueue.after_sync
def _announce(result: tuple[WorkItem, Outcome], *args: Any, **kwargs: Any) -> None:
    item, outcome = result
    if outcome == Outcome.INSERTED:
        send_enqueued([(item.id, item.kind, item.lane)])


aenqueue = enqueue.aio


# -- from the outbox ----------------------------------------------------------------------------


class Relayed(NamedTuple):
    """What the outbox relay hands over: one ``work.<KIND>`` row, as written by ``emit``."""

    id: uuid.UUID
    kind: str  # the work kind, after "work."
    payload: dict[str, Any]
    actor: str
    request_id: uuid.UUID | None
    traceparent: str | None


@transition
def enqueue_relayed(org_id: uuid.UUID, row: Relayed) -> Plan[tuple[WorkItem, Outcome]]:
    """Enqueue the work an outbox row asks for, in ``org_id``: the row's id is the item's id
    and its idempotency key (a second relay of the row meets its own item: ``ID_EXISTS``), the
    row's actor is the author, its request id and traceparent carry over, and the payload's
    ``lane`` entry (default: the kind's lane) becomes the lane and is left out of the payload, as
    do its ``concurrency_key`` and ``rate_key`` entries (the item's keys).

    Takes no context: the relay acts for the row's author, whose context wrote the row; the
    row's tenant is the tenant of the insert, under row-level security like every enqueue.
    """
    payload = dict(row.payload)
    lane = payload.pop("lane", None)
    ckey = payload.pop("concurrency_key", None)
    rkey = payload.pop("rate_key", None)
    new = NewItem(
        row.kind,
        payload,
        id=row.id,
        idempotency_key=str(row.id),
        lane=lane,
        concurrency_key=ckey,
        rate_key=rkey,
    )
    author = Author(org_id, row.actor, row.request_id, check_traceparent(row.traceparent))
    return (yield from insert_one(author, validated(new)))
