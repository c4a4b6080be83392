"""enqueue: put work on the queue for a tenant, never overwriting what is already there."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from functools import cache
from typing import Any, NamedTuple

from project.observability import current_traceparent
from tenancy.contexts import OpContext
from workqueue.db import fetch_scoped_prepared, run_prepared, run_scoped
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.kinds import get_kind, validate_payload
from workqueue.models import WorkItem, new_item_id


class Outcome(StrEnum):
    # A new row was written.
    INSERTED = "inserted"
    # A row with this id existed; it is returned untouched.
    ID_EXISTS = "id_exists"
    # A row (with another id) held this idempotency key; it is returned untouched.
    KEY_EXISTS = "key_exists"


class NewItem(NamedTuple):
    """One item to enqueue. The queue stamps status, attempts, actor, and clears claim fields.

    A named tuple: bulk producers build thousands, and a frozen dataclass costs more to make.
    """

    kind: str
    payload: dict[str, Any]
    id: uuid.UUID | None = None
    idempotency_key: str | None = None
    lane: str | None = None
    priority: int = 0
    available_at: datetime | None = None


def _row(new: NewItem, where: str) -> dict[str, Any]:
    """The validated columns of one item, or ``InvalidPayload`` saying which and why."""
    try:
        kind = get_kind(new.kind)
        payload = validate_payload(kind, new.payload)
    except InvalidPayload as exc:
        raise InvalidPayload(f"{where}{exc}") from None
    if new.idempotency_key is not None and not (0 < len(new.idempotency_key) <= 200):
        raise InvalidPayload(f"{where}idempotency_key: must be 1 to 200 characters")
    if not -32768 <= new.priority <= 32767:
        raise InvalidPayload(f"{where}priority: must fit in a smallint (-32768..32767)")
    if new.available_at is not None and new.available_at.tzinfo is None:
        raise InvalidPayload(f"{where}available_at: must carry a time zone")
    lane = new.lane or kind.lane
    if not (0 < len(lane) <= 50):
        raise InvalidPayload(f"{where}lane: must be 1 to 50 characters")
    return {
        "id": new.id or new_item_id(),
        "kind": kind.name,
        "lane": lane,
        "payload": payload,
        "idempotency_key": new.idempotency_key,
        "priority": new.priority,
        "available_at": new.available_at,
        "max_attempts": kind.max_attempts,
    }


@cache
def _json_name(name: str) -> str:
    """A kind or lane as a JSON string; a batch repeats the same few, so each is written once."""
    return json.dumps(name)


def _json_row(row: dict[str, Any]) -> str:
    key, available_at = row["idempotency_key"], row["available_at"]
    when = "null" if available_at is None else json.dumps(available_at.isoformat())
    return (
        f'{{"id":"{row["id"]}","kind":{_json_name(row["kind"])},'
        f'"lane":{_json_name(row["lane"])},"payload":{row["payload"]},'
        f'"idempotency_key":{"null" if key is None else json.dumps(key)},'
        f'"priority":{row["priority"]},"max_attempts":{row["max_attempts"]},'
        f'"available_at":{when}}}'
    )


def _stamp(ctx: OpContext, created_by: uuid.UUID | None = None) -> dict[str, Any]:
    return {
        "created_by": created_by or ctx.user_id,
        "request_id": ctx.caused_by_request_id or ctx.request_id,
        "traceparent": ctx.rctx.traceparent or current_traceparent(),
    }


def _read_back(ctx: OpContext, rows: list[dict[str, Any]]) -> dict[uuid.UUID | str, WorkItem]:
    """The rows that already held the given ids or keys, by id and by key."""
    found = run_scoped(
        ctx.org_id,
        "read_items",
        {
            "ids": [r["id"] for r in rows],
            "keys": [r["idempotency_key"] for r in rows if r["idempotency_key"]],
        },
    )
    by: dict[uuid.UUID | str, WorkItem] = {}
    for item in found:
        by[item.id] = item
        if item.idempotency_key:
            by[item.idempotency_key] = item
    return by


def _outcome(row: dict[str, Any], by: dict[uuid.UUID | str, WorkItem]) -> tuple[WorkItem, Outcome]:
    if row["id"] in by:
        return by[row["id"]], Outcome.ID_EXISTS
    if row["idempotency_key"] in by:
        return by[row["idempotency_key"]], Outcome.KEY_EXISTS
    # The id is held by another tenant's row: nothing was written and nothing can be shown.
    raise Conflict(f"work item id {row['id']} is taken")


def enqueue(
    ctx: OpContext,
    kind: str,
    payload: dict[str, Any],
    *,
    id: uuid.UUID | None = None,
    idempotency_key: str | None = None,
    lane: str | None = None,
    priority: int = 0,
    available_at: datetime | None = None,
    created_by: uuid.UUID | None = None,
) -> tuple[WorkItem, Outcome]:
    """Insert one pending item in the context's tenant and announce it on ``work_available``.

    One round trip and one prepared statement (``workqueue_enqueue``): the tenant setting, the
    insert and the NOTIFY, in their own transaction or inside the caller's, whose commit then
    announces it. An id or idempotency key that already
    exists inserts nothing; that row is read back and returned untouched, so a retried enqueue
    never resets a claim. ``available_at`` defaults to the database's ``now()``.
    """
    row = _row(NewItem(kind, payload, id, idempotency_key, lane, priority, available_at), "")
    params = {**row, **_stamp(ctx, created_by), "org_id": ctx.org_id}
    inserted = run_prepared("enqueue", params)
    if inserted:
        return inserted[0], Outcome.INSERTED
    return _outcome(row, _read_back(ctx, [row]))


def enqueue_many(
    ctx: OpContext, items: Sequence[NewItem], *, created_by: uuid.UUID | None = None
) -> list[tuple[uuid.UUID, Outcome]]:
    """Insert many items in one statement, with ``enqueue``'s rules; returns, in input order,
    each item's id (for ``KEY_EXISTS``, the id of the row that holds the key) and outcome.

    Every item is validated first: one invalid item refuses the whole batch, naming its index,
    and nothing is stored. Ids, not rows, come back: a bulk producer pays for reading back
    only what collided.
    """
    rows = [_row(new, f"items[{i}].") for i, new in enumerate(items)]
    if not rows:
        return []
    # One JSON array for the whole batch: the server parses it faster than the driver can
    # write eight typed arrays, and each payload is already JSON text.
    batch = "[" + ",".join(map(_json_row, rows)) + "]"
    lanes = sorted({r["lane"] for r in rows})
    inserted = fetch_scoped_prepared(
        ctx.org_id,
        "enqueue_many",
        {"items": batch, **_stamp(ctx, created_by)},
        notify=lanes[0] if len(lanes) == 1 else "*",
    )
    new_ids = {row[0] for row in inserted}
    missing = [r for r in rows if r["id"] not in new_ids]
    existing = _read_back(ctx, missing) if missing else {}
    results = []
    for r in rows:
        if r["id"] in new_ids:
            results.append((r["id"], Outcome.INSERTED))
        else:
            item, outcome = _outcome(r, existing)
            results.append((item.id, outcome))
    return results
