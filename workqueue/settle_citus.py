"""The settles' Citus forms (``WORKQUEUE["CITUS"]``): complete, retry and dead letter under the
item's tenant, on the tenant's login, and the sweep's hand-back of an expired lease's or a gone
holder's items (``requeued``), under the tenant's service context.

On one server each settle is one statement: the item changed, its attempt recorded (and a
ready row, an audit entry) by CTEs fed from the item's change. Citus inserts the rows one CTE
returned into another table by ``COPY``, which row-level security refuses. So here the item's
change names its tenant (Citus routes it whole to the tenant's node) and returns the row;
only when it changed, the same transaction (``TenantChain``) records the attempt, and the ready
row or the audit entry, each one row of values Citus sends to the same node. A stale token
changes nothing and records nothing. Edges are not met: workflows do not run on Citus yet
(``docs/howto/citus.md``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.enqueue import READY_ROW_CITUS, ReadyRowParams
from workqueue.fence import Fence
from workqueue.models import Status, WorkItem
from workqueue.rows import items_of
from wqcore.statements import Statement
from wqcore.store import Rows, TenantChain


class CompleteParams(NamedTuple):
    org_id: uuid.UUID
    id: uuid.UUID
    claim_token: uuid.UUID
    result: str | None


class RetryParams(NamedTuple):
    org_id: uuid.UUID
    id: uuid.UUID
    claim_token: uuid.UUID
    delay_s: float
    error: str


class DeadLetterParams(NamedTuple):
    org_id: uuid.UUID
    id: uuid.UUID
    claim_token: uuid.UUID
    error: str


class AttemptParams(NamedTuple):
    org_id: uuid.UUID
    id: uuid.UUID
    attempt: int
    worker: str
    started_at: datetime | None
    outcome: str
    error: str
    traceback: str


class EntryParams(NamedTuple):
    org_id: uuid.UUID
    id: uuid.UUID
    action: str
    kind: str
    attempts: int
    permanent: bool
    error: str
    actor: str
    request_id: uuid.UUID


COMPLETE_CITUS = Statement("complete_citus", CompleteParams, SQL_DIR)
RETRY_CITUS = Statement("retry_citus", RetryParams, SQL_DIR)
DEAD_LETTER_CITUS = Statement("dead_letter_citus", DeadLetterParams, SQL_DIR)
ATTEMPT_CITUS = Statement("attempt_citus", AttemptParams, SQL_DIR)
ITEM_ENTRY_CITUS = Statement("item_entry_citus", EntryParams, SQL_DIR)

type Runs = Sequence[tuple[Statement, NamedTuple]]


def _attempt(held: WorkItem, changed: WorkItem, outcome: str, error: str, trace: str) -> Runs:
    # The worker is the holder's: a retry's change clears claimed_by.
    params = AttemptParams(
        changed.org_id,
        changed.id,
        changed.attempts,
        held.claimed_by or "",
        changed.claimed_at,
        outcome,
        error,
        trace,
    )
    return [(ATTEMPT_CITUS, params)]


def complete(ctx: OpContext, item: WorkItem, result: str | None) -> TenantChain:
    def then(rows: Rows) -> Runs:
        return [a for done in items_of(rows) for a in _attempt(item, done, "done", "", "")]

    params = CompleteParams(ctx.org_id, item.id, _token(item), result)
    return TenantChain(ctx.org_id, COMPLETE_CITUS, params, then)


def retry(ctx: OpContext, item: WorkItem, delay_s: float, error: str, trace: str) -> TenantChain:
    def then(rows: Rows) -> Runs:
        runs: list[tuple[Statement, NamedTuple]] = []
        for retried in items_of(rows):
            runs += _attempt(item, retried, "retried", error, trace)
            runs.append((READY_ROW_CITUS, ReadyRowParams(retried.org_id, retried.id)))
        return runs

    params = RetryParams(ctx.org_id, item.id, _token(item), delay_s, error)
    return TenantChain(ctx.org_id, RETRY_CITUS, params, then)


def dead_letter(
    ctx: OpContext, item: WorkItem, error: str, trace: str, permanent: bool
) -> TenantChain:
    def then(rows: Rows) -> Runs:
        runs: list[tuple[Statement, NamedTuple]] = []
        for failed in items_of(rows):
            runs += _attempt(item, failed, "dead_lettered", error, trace)
            runs.append(_entry(ctx, failed, "work.dead_lettered", permanent, error))
        return runs

    params = DeadLetterParams(ctx.org_id, item.id, _token(item), error)
    return TenantChain(ctx.org_id, DEAD_LETTER_CITUS, params, then)


def _entry(
    ctx: OpContext, item: WorkItem, action: str, permanent: bool, error: str
) -> tuple[Statement, NamedTuple]:
    params = EntryParams(
        item.org_id,
        item.id,
        action,
        item.kind,
        item.attempts,
        permanent,
        error,
        ctx.user_id,
        ctx.request_id,
    )
    return (ITEM_ENTRY_CITUS, params)


# The column requeue_citus adds to each item's row: its holder as it was.
HELD_BY = "held_by"


def requeued(ctx: OpContext, statement: Statement, params: NamedTuple, outcome: str) -> TenantChain:
    """The sweep's hand-back (``requeue_citus``: an expired lease's, or the rescue's), then what
    requeue_stale writes beside each item: its attempt (ended as ``outcome``), the ready row of
    one requeued, the audit entry of one dead-lettered or cancelled."""

    def then(rows: Rows) -> Runs:
        runs: list[tuple[Statement, NamedTuple]] = []
        held_by = [row[-1] for row in rows.rows]
        for moved, holder in zip(items_of(without_holders(rows)), held_by, strict=True):
            attempt = AttemptParams(
                moved.org_id,
                moved.id,
                moved.attempts,
                holder or "",
                moved.claimed_at,
                str(outcome),
                moved.last_error,
                "",
            )
            runs.append((ATTEMPT_CITUS, attempt))
            if moved.status == Status.PENDING:
                runs.append((READY_ROW_CITUS, ReadyRowParams(moved.org_id, moved.id)))
            elif moved.status in (Status.FAILED, Status.CANCELLED):
                action = "work.dead_lettered" if moved.status == Status.FAILED else "work.cancelled"
                runs.append(_entry(ctx, moved, action, False, moved.last_error))
        return runs

    return TenantChain(ctx.org_id, statement, params, then)


def without_holders(rows: Rows) -> Rows:
    """``rows`` without requeue_citus's ``held_by`` column (the single server's, as they are)."""
    if not rows.names or rows.names[-1] != HELD_BY:
        return rows
    return Rows(rows.names[:-1], [row[:-1] for row in rows.rows])


def _token(item: WorkItem) -> uuid.UUID:
    return Fence.of(item).claim_token
