"""Cancel: stop what should not run.

A waiting or pending item is cancelled at once (status ``cancelled``: the claim never sees it
again; the items that wait for it with ``finished`` go on, those that need it ``done`` stay
held: ``workqueue/dependents.py``). A
claimed one is its holder's, fenced by the claim token, so cancelling it is a request
(``cancel_requested_at``): the holder's next lease renewal reports it (``extend_leases``
returns it beside each renewed id, no round trip of its own), the worker cancels the handler
and ends the item ``cancelled`` through ``cancel_held``, fenced by its claim token; a handler
that had marked a side effect is dead-lettered instead, as any failure after one is. Should
the holder retry, defer or release it meanwhile, or die and the sweep hand it back, the item
ends cancelled there too (those statements read the request): a cancelled item never runs
again. An item already done, failed, discarded or cancelled is left as it is.

Each is one statement that appends an audit entry per item naming the actor (``work.cancelled``,
or ``work.cancel_requested`` for a running one), under the item's tenant (row-level security),
or, for the operator's bulk cancel, across tenants on the system login. Bulk: every item of a
kind (and lane, statuses, tenant) in statements of ``batch`` items each; a run stopped midway
leaves what it did, and running it again goes on with the rest (cancelled items no longer
match), so it is resumable.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from audit.api import APPEND_ENTRIES, AppendEntriesParams
from tenancy.contexts import OpContext, RequestContext
from tenancy.services import operator_context
from workqueue import SQL_DIR
from workqueue.dependents import RELEASE_ENDED
from workqueue.enqueue import READ_ITEMS, ReadItemsParams
from workqueue.exceptions import Conflict, InvalidPayload, NotFound
from workqueue.fence import Fence
from workqueue.inputs import KIND_MAX, check_id, check_lane, check_name, storable_text
from workqueue.models import Status, WorkItem
from workqueue.ready import FORGET_READY
from workqueue.rows import items_of
from workqueue.settle import count_refused
from workqueue.triage.drawn import Drawn, Triaged, TriageParams, checked_fences, result_of
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Step, System, Tenant, transition

logger = logging.getLogger(__name__)

# What a cancel acts on: a waiting or pending item (at once) or a claimed one (its holder is
# asked).
CANCELLABLE = frozenset({Status.WAITING.value, Status.PENDING.value, Status.CLAIMED.value})
# The statuses that end an item: a cancel leaves them as they are.
FINAL = frozenset({Status.DONE, Status.FAILED, Status.DISCARDED, Status.CANCELLED})
# Items per statement of a bulk cancel, by default: one audit entry each, in the same
# statement, so a batch stays a short transaction.
BULK_BATCH = 1000
BULK_BATCH_MAX = 10_000


class CancelItemsParams(NamedTuple):
    ids: list[uuid.UUID]
    # Who the audit entries name, and their request.
    actor: str
    request_id: uuid.UUID


class CancelMatchingParams(NamedTuple):
    kind: str
    lane: str | None
    # None: every tenant (the operator, on the system login).
    org_id: uuid.UUID | None
    statuses: list[str]
    batch: int
    actor: str
    request_id: uuid.UUID | None


class CancelHeldParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID
    note: str
    actor: str
    request_id: uuid.UUID | None


# The cancel of the locked rows and its audit entries, spelled once for both (by id, as drawn).
CANCEL_SEEN = Statement(
    "cancel_seen",
    AppendEntriesParams,
    SQL_DIR,
    includes=(APPEND_ENTRIES, RELEASE_ENDED, FORGET_READY),
)
CANCEL_ITEMS = Statement("cancel_items", CancelItemsParams, SQL_DIR, includes=(CANCEL_SEEN,))
CANCEL_DRAWN = Statement("cancel_drawn", TriageParams, SQL_DIR, includes=(CANCEL_SEEN,))
CANCEL_MATCHING = Statement(
    "cancel_matching",
    CancelMatchingParams,
    SQL_DIR,
    includes=(APPEND_ENTRIES, RELEASE_ENDED, FORGET_READY),
)
CANCEL_HELD = Statement(
    "cancel_held", CancelHeldParams, SQL_DIR, includes=(APPEND_ENTRIES, RELEASE_ENDED)
)


class ItemTenantParams(NamedTuple):
    id: uuid.UUID


ITEM_TENANT = Statement("item_tenant", ItemTenantParams, SQL_DIR)


def is_cancel_requested(item: WorkItem) -> bool:
    """Whether someone asked to cancel this claimed item (its holder has not ended it yet)."""
    return item.status == Status.CLAIMED and item.cancel_requested_at is not None


# -- one item, by id ----------------------------------------------------------------------------


@transition
def cancel(ctx: OpContext, item_id: Any) -> Plan[WorkItem]:
    """Cancel the context's tenant's item ``item_id``: a waiting or pending one is
    ``cancelled`` at once (never claimed); a claimed one gets a cancel request, which its holder
    learns at its next lease renewal (the item is returned still ``claimed``, with
    ``cancel_requested_at``). Each with an audit entry naming ``ctx``'s user, in the same
    statement. Asking again returns the item as it is. Raises ``NotFound`` (no such item in
    this tenant, or not a UUID: ``InvalidPayload``) or ``Conflict`` (already done, failed or
    discarded: nothing changes). Joins the caller's transaction."""
    wanted = check_id(item_id, "id")
    params = CancelItemsParams([wanted], ctx.user_id, ctx.request_id)
    rows: Rows = yield Tenant(ctx.org_id, CANCEL_ITEMS, params)
    moved = items_of(rows)
    if moved:
        item = moved[0]
        log_event(
            logger,
            logging.INFO,
            "work_cancel",
            org=ctx.org_id,
            actor=ctx.user_id,
            item=item.id,
            status="cancelled" if item.status == Status.CANCELLED else "requested",
        )
        return item
    # Nothing changed: say why (a second round trip only on this path).
    found = items_of((yield Tenant(ctx.org_id, READ_ITEMS, ReadItemsParams([wanted], []))))
    if not found:
        raise NotFound(f"no work item {wanted} in this tenant")
    item = found[0]
    if item.status == Status.CANCELLED or is_cancel_requested(item):
        return item  # asked before: the same answer again
    raise Conflict(f"work item {item.id} is {item.status}: there is nothing to cancel")


acancel = cancel.aio


@transition
def operator_cancel(rctx: RequestContext, actor: str, item_id: Any) -> Plan[WorkItem]:
    """The operator's cancel of one item by id, whatever its tenant (``manage.py queue
    cancel ID``): as ``cancel``, in the item's tenant, audited naming ``actor``.

    Finds the item's tenant on the system login (the command line names none); the cancel
    itself runs under that tenant's row-level security."""
    wanted = check_id(item_id, "id")
    rows: Rows = yield System(ITEM_TENANT, ItemTenantParams(wanted))
    if not rows.rows:
        raise NotFound(f"no work item {wanted}")
    ctx = operator_context(rctx, rows.rows[0][0], actor)
    return (yield from cancel.plan(ctx, wanted))


# -- as the operator saw them (the admin's action) ----------------------------------------------


@transition
def cancel_drawn(ctx: OpContext, drawn: Sequence[Drawn]) -> Plan[Triaged]:
    """Cancel the context's tenant's items as the operator's page drew them (at most
    ``MAX_BATCH``): a waiting or pending one only if still so with the ``updated_at`` it was drawn
    with; a claimed one if still claimed (its ``updated_at`` moves at every lease renewal, so
    the fence is its status: the request asks whoever holds it now to stop), by a cancel
    request to its holder. The rest come back in ``refused``. Audited per item with ``ctx``'s
    user. Joins the caller's transaction."""
    fences = checked_fences(drawn, CANCELLABLE, "cancel")
    rows: Rows = yield Tenant(ctx.org_id, CANCEL_DRAWN, TriageParams.of(ctx, fences))
    result = result_of(fences, rows)
    log_event(
        logger,
        logging.INFO,
        "work_cancel",
        org=ctx.org_id,
        actor=ctx.user_id,
        changed=len(result.changed),
        refused=len(result.refused),
    )
    return result


# -- bulk: every item matching a filter ---------------------------------------------------------


@dataclass(frozen=True)
class BulkCancelled:
    # Pending items cancelled, and claimed ones whose holders were asked.
    cancelled: int
    requested: int
    # Statements run; ``finished``: the last came back short (nothing more matches now).
    batches: int
    finished: bool


@dataclass(frozen=True)
class Filter:
    """Which items a bulk cancel acts on (checked: one clear message per wrong field)."""

    kind: str
    lane: str | None = None
    statuses: tuple[str, ...] = (Status.WAITING.value, Status.PENDING.value, Status.CLAIMED.value)

    @classmethod
    def checked(cls, kind: Any, lane: Any = None, statuses: Any = None) -> Filter:
        kind = check_name("kind", kind, KIND_MAX)
        lane = check_lane(lane, "lane") if lane is not None else None
        wanted = tuple(dict.fromkeys(statuses)) if statuses else cls.statuses
        for status in wanted:
            if status not in CANCELLABLE:
                raise InvalidPayload(
                    f"status: a cancel acts on waiting, pending or claimed items, not {status!r}"
                )
        return cls(kind, lane, wanted)


def _check_bounds(batch: Any, max_batches: Any) -> tuple[int, int | None]:
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= BULK_BATCH_MAX:
        raise InvalidPayload(f"batch: must be a whole number from 1 to {BULK_BATCH_MAX}")
    if max_batches is not None and (
        isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1
    ):
        raise InvalidPayload("max_batches: must be a whole number of at least 1, or None")
    return batch, max_batches


def _cancel_matching(
    step: Callable[[CancelMatchingParams], Step],
    where: Filter,
    bounds: tuple[int, int | None],
    params: dict[str, Any],
    on_batch: Callable[[BulkCancelled], object] | None = None,
) -> Plan[BulkCancelled]:
    """``step``'s statement (one tenant's, or every tenant's) over what ``where`` matches,
    ``bounds``: (batch, max_batches), until a batch comes back short or the budget is spent;
    ``on_batch`` is told what it did so far after each batch."""
    batch, max_batches = bounds
    cancelled = requested = batches = 0
    finished = False
    while max_batches is None or batches < max_batches:
        values = CancelMatchingParams(
            kind=where.kind,
            lane=where.lane,
            statuses=list(where.statuses),
            batch=batch,
            **params,
        )
        rows: Rows = yield step(values)
        batches += 1
        done, asked = rows.rows[0]
        cancelled, requested = cancelled + done, requested + asked
        if on_batch is not None:
            on_batch(BulkCancelled(cancelled, requested, batches, False))
        if done + asked < batch:
            finished = True
            break  # a short batch: nothing more matches (rows locked by others: the next run)
    result = BulkCancelled(cancelled, requested, batches, finished)
    log_event(
        logger,
        logging.INFO,
        "work_cancel_bulk",
        org=params["org_id"] or "all",
        actor=params["actor"],
        kind=where.kind,
        lane=where.lane or "-",
        cancelled=cancelled,
        requested=requested,
        batches=batches,
        finished=finished,
    )
    return result


@transition
def cancel_matching(
    ctx: OpContext,
    kind: str,
    *,
    lane: str | None = None,
    statuses: Sequence[str] | None = None,
    batch: int = BULK_BATCH,
    max_batches: int | None = None,
) -> Plan[BulkCancelled]:
    """Cancel every item of the context's tenant of ``kind`` (and ``lane``; ``statuses``,
    waiting, pending and claimed by default) as ``cancel`` does each, ``batch`` per statement
    (each its own short transaction unless the caller holds one), until a batch comes back short or
    ``max_batches`` ran. Resumable: running it again goes on with what is left. Rows another
    transaction holds locked are skipped (a later run takes them). Audited per item with
    ``ctx``'s user."""
    where = Filter.checked(kind, lane, statuses)
    bounds = _check_bounds(batch, max_batches)
    params = {"org_id": ctx.org_id, "actor": ctx.user_id, "request_id": ctx.request_id}

    def step(values: CancelMatchingParams) -> Step:
        return Tenant(ctx.org_id, CANCEL_MATCHING, values)

    return (yield from _cancel_matching(step, where, bounds, params))


acancel_matching = cancel_matching.aio


@transition
def operator_cancel_matching(
    actor: str,
    kind: str,
    *,
    org_id: uuid.UUID | str | None = None,
    lane: str | None = None,
    statuses: Sequence[str] | None = None,
    batch: int = BULK_BATCH,
    max_batches: int | None = None,
    request_id: uuid.UUID | None = None,
    on_batch: Callable[[BulkCancelled], object] | None = None,
) -> Plan[BulkCancelled]:
    """The operator's bulk cancel (``manage.py queue cancel --kind``): as ``cancel_matching``,
    in one tenant (``org_id``) or every tenant (None), each item's audit entry in its own
    tenant naming ``actor``; ``on_batch`` is told what it did so far after each batch (the
    command's progress).

    Runs on the system login across tenants: the operator acts on the whole queue, and one
    statement per batch across tenants is what keeps a bulk cancel of a million items
    bounded; the filter, not a tenant, says which items.
    """
    where = Filter.checked(kind, lane, statuses)
    bounds = _check_bounds(batch, max_batches)
    tenant = check_id(org_id, "tenant") if org_id is not None else None
    params = {"org_id": tenant, "actor": storable_text(str(actor))[:255], "request_id": request_id}

    def step(values: CancelMatchingParams) -> Step:
        return System(CANCEL_MATCHING, values)

    return (yield from _cancel_matching(step, where, bounds, params, on_batch))


# -- the holder ---------------------------------------------------------------------------------


@transition
def cancel_held(ctx: OpContext, item: WorkItem, note: str) -> Plan[WorkItem]:
    """End the held item ``cancelled`` (its holder, once the renewal reported a cancel
    request), if ``item.claim_token`` still holds it, with a ``work.cancelled`` audit entry in
    the same statement; ``Conflict`` otherwise (nothing changes)."""
    fence = Fence.of(item)
    params = CancelHeldParams(
        fence.item_id, fence.claim_token, storable_text(note), ctx.user_id, ctx.request_id
    )
    rows: Rows = yield Tenant(ctx.org_id, CANCEL_HELD, params)
    if not rows.rows:
        count_refused("cancel")
        raise Conflict(f"cancel: work item {item.id} is no longer held under this claim token")
    return items_of(rows)[0]


acancel_held = cancel_held.aio
