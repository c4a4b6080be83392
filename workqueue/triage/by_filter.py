"""Requeue or discard every dead letter a filter matches, fenced on the moment the operator
confirmed, in bounded batches that a second run resumes."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from audit.api import APPEND_ENTRIES
from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.dependents import HOLD_REQUEUED
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import is_aware
from workqueue.ready import READY_ROWS
from workqueue.triage.matching import DEAD_MATCHING, DeadFilter, count_dead, match_values
from wqcore.conf import wq_settings
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Tenant, transition

logger = logging.getLogger("workqueue.triage")


class MatchingActionParams(NamedTuple):
    until: datetime | None
    since: datetime | None
    error_like: str | None
    window_s: float
    kind: str | None
    lane: str | None
    org_id: uuid.UUID | None
    before: datetime
    batch: int
    # The filter as JSON text, kept in each audit entry.
    filter: str
    actor: str
    request_id: uuid.UUID


REQUEUE_MATCHING = Statement(
    "requeue_matching",
    MatchingActionParams,
    SQL_DIR,
    includes=(DEAD_MATCHING, APPEND_ENTRIES, HOLD_REQUEUED, READY_ROWS),
)
DISCARD_MATCHING = Statement(
    "discard_matching",
    MatchingActionParams,
    SQL_DIR,
    includes=(DEAD_MATCHING, APPEND_ENTRIES),
)


@dataclass(frozen=True)
class Progress:
    """What a triage by filter did in one tenant: items changed, items read but left alone
    (changed since the moment confirmed), and whether it got through (``done``) or stopped at
    its batch budget, to be resumed."""

    changed: int
    left_alone: int
    done: bool


MATCHING_ACTIONS = {"requeue": REQUEUE_MATCHING, "discard": DISCARD_MATCHING}


def _in_batches(
    statement: Statement,
    ctx: OpContext,
    dead: DeadFilter,
    until: datetime,
    budget: tuple[int, int],
    on_batch: Callable[[int], object] | None = None,
) -> Plan[Progress]:
    """Run ``statement`` over what ``dead`` matches, ``budget``: (batch, max_batches), oldest
    failure last, until a batch comes back short or the budget is spent; ``on_batch`` is told
    how many items each batch changed."""
    batch, max_batches = budget
    described = json.dumps({**dead.described(), "until": until.isoformat()})
    before, changed, left = until, 0, 0
    for _ in range(max_batches):
        params = MatchingActionParams(
            **match_values(dead, until),
            before=before,
            batch=batch,
            filter=described,
            actor=ctx.user_id,
            request_id=ctx.request_id,
        )
        rows: Rows = yield Tenant(ctx.org_id, statement, params)
        read, oldest, moved = rows.rows[0][:3]
        changed, left = changed + int(moved), left + int(read) - int(moved)
        if on_batch is not None:
            on_batch(int(moved))
        # A batch smaller than asked for was the last: nothing older matches.
        if int(read) < batch:
            return Progress(changed, left, True)
        # The next batch starts at the oldest this one read (inclusive: items failed at the
        # same instant; those this one changed no longer match).
        before = oldest
    return Progress(changed, left, False)


@transition
def act_on_matching(
    action: str,
    ctx: OpContext,
    dead: DeadFilter,
    until: datetime,
    batch: int | None = None,
    max_batches: int | None = None,
    on_batch: Callable[[int], object] | None = None,
) -> Plan[Progress]:
    """Requeue (``action`` "requeue": pending now, attempts reset) or discard ("discard") the
    context's tenant's dead letters that ``dead`` matches, in batches of ``batch``
    (``WORKQUEUE["TRIAGE_BATCH"]``), at most ``max_batches`` of them
    (``TRIAGE_MAX_BATCHES``), each one statement. Fenced on ``until``, the moment the operator
    confirmed: only items still failed and unchanged since then change, so an item requeued,
    retried or failed again meanwhile is left alone, and running it again with the same
    ``until`` resumes where it stopped. Each item changed gets its audit entry naming ``ctx``'s
    user, with the filter. Joins the caller's transaction (else each batch commits alone).
    ``on_batch`` is told how many items each batch changed (a command's progress)."""
    statement = MATCHING_ACTIONS.get(action)
    if statement is None:
        raise InvalidPayload(f"action: must be one of {', '.join(MATCHING_ACTIONS)}")
    if not is_aware(until):
        raise InvalidPayload("until: must be a timestamp with a time zone")
    budget = (
        int(batch or wq_settings.TRIAGE_BATCH),
        int(max_batches or wq_settings.TRIAGE_MAX_BATCHES),
    )
    result = yield from _in_batches(statement, ctx, dead.checked(), until, budget, on_batch)
    log_event(
        logger,
        logging.INFO,
        f"work_{action}_by_filter",
        org=ctx.org_id,
        actor=ctx.user_id,
        changed=result.changed,
        left_alone=result.left_alone,
        done=result.done,
    )
    return result


@dataclass
class Swept:
    """A triage by filter across the tenants it reached."""

    changed: int = 0
    left_alone: int = 0
    # Whether every tenant's run got through: else the same filter and moment resume it.
    done: bool = True
    tenants: int = 0


def act_on_every_match(
    action: str,
    dead: DeadFilter,
    until: datetime,
    context_of: Callable[[uuid.UUID], OpContext],
    scope: uuid.UUID | None = None,
    max_batches: int | None = None,
    on_batch: Callable[[int], object] | None = None,
) -> Swept:
    """``act_on_matching`` in each tenant holding dead letters ``dead`` matches (found across
    tenants on the system login for the operator, ``scope`` None; else only ``scope``'s, under
    its row-level security), each under the context ``context_of(tenant)`` gives (whom its
    audit entries name). ``max_batches`` is the budget of the whole call; ``on_batch`` is told
    how many items each batch changed."""
    budget = int(max_batches or wq_settings.TRIAGE_MAX_BATCHES)
    counted = count_dead(dead, scope, until)
    swept = Swept(done=not counted.capped)
    batch = wq_settings.TRIAGE_BATCH
    for org_id, items in sorted(counted.by_tenant.items(), key=lambda t: -t[1]):
        if budget <= 0:
            swept.done = False
            break
        wanted = min(budget, -(-items // batch) + 1)
        progress = act_on_matching(
            action, context_of(org_id), dead, until, batch, wanted, on_batch=on_batch
        )
        budget -= wanted
        swept.changed += progress.changed
        swept.left_alone += progress.left_alone
        swept.tenants += 1
        swept.done = swept.done and progress.done
    return swept
