"""Requeue dead letters as the operator drew them: back to pending (after a delay), or with an
edited payload."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from audit.api import APPEND_ENTRIES
from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.dependents import HOLD_REQUEUED
from workqueue.enqueue import READ_ITEMS, ReadItemsParams
from workqueue.exceptions import Conflict
from workqueue.kinds import get_kind, validate_payload
from workqueue.models import WorkItem
from workqueue.ready import READY_ROWS
from workqueue.rows import items_of
from workqueue.triage.drawn import (
    REQUEUEABLE,
    Drawn,
    Triaged,
    check_delay,
    checked_fences,
    log_triaged,
    result_of,
)
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Tenant, transition


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


REQUEUE_DEAD = Statement(
    "requeue_dead",
    RequeueDeadParams,
    SQL_DIR,
    includes=(APPEND_ENTRIES, HOLD_REQUEUED, READY_ROWS),
)
REQUEUE_EDITED = Statement(
    "requeue_edited",
    RequeueEditedParams,
    SQL_DIR,
    includes=(APPEND_ENTRIES, HOLD_REQUEUED, READY_ROWS),
)


@transition
def requeue_dead(ctx: OpContext, drawn: Sequence[Drawn], delay_s: float = 0.0) -> Plan[Triaged]:
    """Put the context's tenant's dead letters back to pending, due after ``delay_s``, with
    their attempts reset; each one's error and attempts stay in its ``work.requeued`` audit
    entry, which names ``ctx``'s user. Only items still failed with the ``updated_at`` they were
    drawn with change; the rest come back in ``refused``. Joins the caller's transaction."""
    fences = checked_fences(drawn, REQUEUEABLE, "requeue")
    params = RequeueDeadParams(
        [f.id for f in fences],
        [f.status for f in fences],
        [f.updated_at for f in fences],
        check_delay(delay_s),
        ctx.user_id,
        ctx.request_id,
    )
    result = result_of(fences, (yield Tenant(ctx.org_id, REQUEUE_DEAD, params)))
    log_triaged("work_requeued", ctx, result)
    return result


@transition
def requeue_edited(ctx: OpContext, drawn: Drawn, payload: dict[str, Any]) -> Plan[WorkItem]:
    """Replace a dead letter's payload (validated against its kind's schema: a bad one raises
    ``InvalidPayload`` naming the field and changes nothing) and put it back to pending now with
    its attempts reset. Its ``work.requeued_edited`` audit entry keeps the payload before and
    after, the error and the attempts, and names ``ctx``'s user. Raises ``Conflict`` when the
    item is no longer as drawn (nothing changes). Joins the caller's transaction."""
    (fence,) = checked_fences([drawn], REQUEUEABLE, "requeue")
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
    log_triaged("work_requeued_edited", ctx, result)
    return result.changed[0]
