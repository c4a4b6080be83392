"""Triage: what an operator does with dead letters: requeue them (now or after a delay),
discard them, or edit a payload and requeue it.

Each is one statement under the items' tenant (row-level security applies), fenced on what the
operator saw: the item's status and ``updated_at`` as the confirmation page drew them
(``Drawn``). An item that changed since (claimed, completed, requeued or discarded by someone
else) matches nothing and is left as it is; the result names it. Each statement appends an audit
entry per item naming the operator and keeping what the item had (error, attempts, payload), and
the requeues announce their lanes on ``work_available``. Bounded: at most ``MAX_BATCH`` items
per call.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.utils.dateparse import parse_datetime

from audit.services import APPEND_ENTRIES
from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.enqueue import READ_ITEMS, ReadItemsParams
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.inputs import check_id
from workqueue.kinds import get_kind, validate_payload
from workqueue.models import Status, WorkItem
from workqueue.rows import items_of
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Tenant, arun, run

logger = logging.getLogger(__name__)

# The most items one triage call changes: a confirmation page lists each one.
MAX_BATCH = 100
# The longest delay a requeue takes (30 days).
MAX_DELAY_S = 30 * 86400
# What each action may act on: a claimed item is its holder's (the claim token fences it).
REQUEUEABLE = frozenset({Status.FAILED.value})
DISCARDABLE = frozenset({Status.FAILED.value, Status.PENDING.value})


class Drawn(NamedTuple):
    """An item as the operator saw it: the fence a triage action presents."""

    id: uuid.UUID
    status: str
    updated_at: datetime

    @classmethod
    def of(cls, item: WorkItem) -> Drawn:
        return cls(item.id, item.status, item.updated_at)

    def token(self) -> str:
        """The fence as one string, for a hidden form field (``parse`` reads it back)."""
        return f"{self.id}|{self.status}|{self.updated_at.isoformat()}"

    @classmethod
    def parse(cls, text: Any) -> Drawn:
        """A fence from ``token``'s string, or ``InvalidPayload`` naming the field."""
        parts = text.split("|") if isinstance(text, str) and len(text) <= 200 else []
        if len(parts) != 3:
            raise InvalidPayload("fence: must be id|status|updated_at, as the page drew it")
        item_id = check_id(parts[0], "fence.id")
        if parts[1] not in Status.values:
            raise InvalidPayload("fence.status: not a status")
        try:
            when = parse_datetime(parts[2])
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise InvalidPayload("fence.updated_at: must be a timestamp with a time zone")
        return cls(item_id, parts[1], when)


@dataclass(frozen=True)
class Triaged:
    # The items the action changed, as they are now.
    changed: list[WorkItem]
    # The items left as they were: changed since the page was drawn (or not in the tenant).
    refused: list[uuid.UUID]


class TriageParams(NamedTuple):
    ids: list[uuid.UUID]
    statuses: list[str]
    updated_ats: list[datetime]
    # Who the audit entries name: the operator, and their request.
    actor: str
    request_id: uuid.UUID


class RequeueDeadParams(NamedTuple):
    ids: list[uuid.UUID]
    statuses: list[str]
    updated_ats: list[datetime]
    delay_s: float
    actor: str
    request_id: uuid.UUID


class RequeueEditedParams(NamedTuple):
    id: uuid.UUID
    updated_at: datetime
    payload: str  # JSON text, validated against the item's kind
    actor: str
    request_id: uuid.UUID


REQUEUE_DEAD = Statement("requeue_dead", RequeueDeadParams, SQL_DIR, includes=(APPEND_ENTRIES,))
DISCARD = Statement("discard", TriageParams, SQL_DIR, includes=(APPEND_ENTRIES,))
REQUEUE_EDITED = Statement(
    "requeue_edited", RequeueEditedParams, SQL_DIR, includes=(APPEND_ENTRIES,)
)


def _checked(drawn: Sequence[Drawn], allowed: frozenset[str], action: str) -> list[Drawn]:
    """The fences to present, or ``InvalidPayload``: 1 to ``MAX_BATCH`` distinct items, each
    drawn in a status the action may act on."""
    fences = list(dict.fromkeys(drawn))
    if not fences:
        raise InvalidPayload("items: select at least one item")
    if len(fences) > MAX_BATCH:
        raise InvalidPayload(f"items: at most {MAX_BATCH} at a time (got {len(fences)})")
    for fence in fences:
        if not isinstance(fence, Drawn):
            raise InvalidPayload(f"items: must be Drawn fences, got {type(fence).__name__}")
        if fence.status not in allowed:
            raise InvalidPayload(
                f"items: {action} acts on {' or '.join(sorted(allowed))} items; "
                f"{fence.id} is {fence.status}"
            )
    return fences


def check_delay(delay_s: Any) -> float:
    """A requeue's delay in seconds, or ``InvalidPayload`` saying what it may be."""
    if (
        isinstance(delay_s, bool)
        or not isinstance(delay_s, int | float)
        or not math.isfinite(delay_s)
        or not 0 <= delay_s <= MAX_DELAY_S
    ):
        raise InvalidPayload(f"delay: must be 0 to {MAX_DELAY_S} seconds (30 days)")
    return float(delay_s)


def _result(fences: list[Drawn], rows: Rows) -> Triaged:
    changed = items_of(rows)
    done = {item.id for item in changed}
    return Triaged(changed, [f.id for f in fences if f.id not in done])


def _log(event: str, ctx: OpContext, result: Triaged) -> None:
    log_event(
        logger,
        logging.INFO,
        event,
        tenant=str(ctx.org_id),
        actor=ctx.user_id,
        changed=len(result.changed),
        refused=len(result.refused),
    )


# -- requeue ------------------------------------------------------------------------------------


def requeue_dead_plan(ctx: OpContext, drawn: Sequence[Drawn], delay_s: float) -> Plan:
    fences = _checked(drawn, REQUEUEABLE, "requeue")
    params = RequeueDeadParams(
        [f.id for f in fences],
        [f.status for f in fences],
        [f.updated_at for f in fences],
        check_delay(delay_s),
        ctx.user_id,
        ctx.request_id,
    )
    result = _result(fences, (yield Tenant(ctx.org_id, REQUEUE_DEAD, params)))
    _log("work_requeued", ctx, result)
    return result


def requeue_dead(ctx: OpContext, drawn: Sequence[Drawn], delay_s: float = 0.0) -> Triaged:
    """Put the context's tenant's dead letters back to pending, due after ``delay_s``, with
    their attempts reset; each one's error and attempts stay in its ``work.requeued`` audit
    entry, which names ``ctx``'s user. Only items still failed with the ``updated_at`` they were
    drawn with change; the rest come back in ``refused``. Joins the caller's transaction."""
    return run(requeue_dead_plan(ctx, drawn, delay_s))


async def arequeue_dead(ctx: OpContext, drawn: Sequence[Drawn], delay_s: float = 0.0) -> Triaged:
    """Async version of ``requeue_dead``."""
    return await arun(requeue_dead_plan(ctx, drawn, delay_s))


# -- discard ------------------------------------------------------------------------------------


def discard_plan(ctx: OpContext, drawn: Sequence[Drawn]) -> Plan:
    fences = _checked(drawn, DISCARDABLE, "discard")
    params = TriageParams(
        [f.id for f in fences],
        [f.status for f in fences],
        [f.updated_at for f in fences],
        ctx.user_id,
        ctx.request_id,
    )
    result = _result(fences, (yield Tenant(ctx.org_id, DISCARD, params)))
    _log("work_discarded", ctx, result)
    return result


def discard(ctx: OpContext, drawn: Sequence[Drawn]) -> Triaged:
    """Set the context's tenant's dead letters (or pending items) aside as ``discarded``: never
    run, purged later. Each one's ``work.discarded`` audit entry keeps its payload, error and
    attempts and names ``ctx``'s user. Only items still as drawn change; the rest come back in
    ``refused``. Joins the caller's transaction."""
    return run(discard_plan(ctx, drawn))


async def adiscard(ctx: OpContext, drawn: Sequence[Drawn]) -> Triaged:
    """Async version of ``discard``."""
    return await arun(discard_plan(ctx, drawn))


# -- edit the payload, then requeue -------------------------------------------------------------


def requeue_edited_plan(ctx: OpContext, drawn: Drawn, payload: Any) -> Plan:
    (fence,) = _checked([drawn], REQUEUEABLE, "requeue")
    found: Rows = yield Tenant(ctx.org_id, READ_ITEMS, ReadItemsParams([fence.id], []))
    items = items_of(found)
    if not items:
        raise Conflict(f"work item {fence.id} is not in this tenant")
    text = validate_payload(get_kind(items[0].kind), payload)
    params = RequeueEditedParams(fence.id, fence.updated_at, text, ctx.user_id, ctx.request_id)
    rows: Rows = yield Tenant(ctx.org_id, REQUEUE_EDITED, params)
    if not rows.rows:
        raise Conflict(
            f"work item {fence.id} changed since the page was drawn; nothing was changed"
        )
    result = Triaged(items_of(rows), [])
    _log("work_requeued_edited", ctx, result)
    return result.changed[0]


def requeue_edited(ctx: OpContext, drawn: Drawn, payload: dict[str, Any]) -> WorkItem:
    """Replace a dead letter's payload (validated against its kind's schema: a bad one raises
    ``InvalidPayload`` naming the field and changes nothing) and put it back to pending now with
    its attempts reset. Its ``work.requeued_edited`` audit entry keeps the payload before and
    after, the error and the attempts, and names ``ctx``'s user. Raises ``Conflict`` when the
    item is no longer as drawn (nothing changes). Joins the caller's transaction."""
    return run(requeue_edited_plan(ctx, drawn, payload))


async def arequeue_edited(ctx: OpContext, drawn: Drawn, payload: dict[str, Any]) -> WorkItem:
    """Async version of ``requeue_edited``."""
    return await arun(requeue_edited_plan(ctx, drawn, payload))
