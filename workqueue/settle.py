"""What the holder of a claim does with the item: complete, fail, defer, release, extend (and,
asked to, cancel: ``workqueue/cancel.py``).

Each is one statement conditioned on the item's ``claim_token`` (and status ``claimed``),
never on ``claimed_by``: one worker can hold one item twice across a requeue. No row changed
means the caller no longer holds the claim: ``Conflict``, and nothing changes. Refused writes
are counted here, and only here (``workqueue_stale_writes_refused_total``). On Citus
(``WORKQUEUE["CITUS"]``) complete and fail take their forms in ``settle_citus``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import NamedTuple

from audit.api import APPEND_ENTRIES
from tenancy.contexts import OpContext
from workqueue import SQL_DIR, settle_citus
from workqueue.dependents import RELEASE_DONE, RELEASE_ENDED
from workqueue.exceptions import Conflict
from workqueue.fence import Fence, Fences
from workqueue.inputs import storable_text, storable_traceback
from workqueue.kinds import get_kind
from workqueue.metrics import DEAD_LETTERED, STALE_WRITES
from workqueue.models import WorkItem
from workqueue.ready import READY_ROWS
from workqueue.results import result_json
from workqueue.rows import items_of
from workqueue.rules import is_exhausted, retry_delay
from wqcore.arrays import TextArray
from wqcore.conf import wq_settings
from wqcore.statements import NoParams, Statement
from wqcore.store import Plan, Rows, System, Tenant, transition


class FenceParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID


class CompleteParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID
    # The result as JSON text (None: none).
    result: str | None


class CompleteManyParams(NamedTuple):
    org_ids: list[uuid.UUID]
    ids: list[uuid.UUID]
    tokens: list[uuid.UUID]
    # Each item's result as JSON text, in the ids' order (None: none); None when no item of
    # the batch has one, so a batch of plain items reads no array.
    results: TextArray | None


class RetryParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID
    delay_s: float
    error: str
    traceback: str


class DeadLetterParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID
    error: str
    traceback: str
    permanent: bool
    # Who the audit entry names: the context the work ran under, and its request.
    actor: str
    request_id: uuid.UUID


class GiveBackParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID
    delay_s: float
    note: str


class ExtendLeaseParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID
    lease_s: float


class ExtendLeasesParams(NamedTuple):
    org_ids: list[uuid.UUID]
    ids: list[uuid.UUID]
    tokens: list[uuid.UUID]
    lease_s: float


# Included where a statement settles a claim: records each attempt it ended (Attempt).
RECORD_ATTEMPTS = Statement("record_attempts", NoParams, SQL_DIR)
COMPLETE = Statement("complete", CompleteParams, SQL_DIR, includes=(RECORD_ATTEMPTS, RELEASE_DONE))
RETRY = Statement(
    "retry", RetryParams, SQL_DIR, includes=(RECORD_ATTEMPTS, RELEASE_ENDED, READY_ROWS)
)
DEAD_LETTER = Statement(
    "dead_letter",
    DeadLetterParams,
    SQL_DIR,
    includes=(APPEND_ENTRIES, RECORD_ATTEMPTS, RELEASE_ENDED),
)
GIVE_BACK = Statement("give_back", GiveBackParams, SQL_DIR, includes=(RELEASE_ENDED, READY_ROWS))
EXTEND_LEASE = Statement("extend_lease", ExtendLeaseParams, SQL_DIR)
COMPLETE_MANY = Statement(
    "complete_many", CompleteManyParams, SQL_DIR, includes=(RECORD_ATTEMPTS, RELEASE_DONE)
)
EXTEND_LEASES = Statement("extend_leases", ExtendLeasesParams, SQL_DIR)

# The longest retry delay a caller may ask ``fail`` for.
MAX_RETRY_DELAY_S = 86_400.0


def count_refused(transition: str, n: int = 1) -> None:
    """Count writes refused because the writer no longer held the claim token."""
    if n:
        STALE_WRITES.labels(transition).inc(n)


def _held(transition: str, item: WorkItem, rows: Rows) -> WorkItem:
    if not rows.rows:
        count_refused(transition)
        raise Conflict(
            f"{transition}: work item {item.id} is no longer held under this claim token"
        )
    return items_of(rows)[0]


def _fence(item: WorkItem) -> FenceParams:
    fence = Fence.of(item)
    return FenceParams(fence.item_id, fence.claim_token)


# -- one item, under its tenant -----------------------------------------------------------------


@transition
def complete(ctx: OpContext, item: WorkItem, result: object = None) -> Plan[WorkItem]:
    """Mark the item done with its ``result`` (what its handler returned; None: none), if
    ``item.claim_token`` still holds it, recording its attempt. A result that cannot be stored
    is ``UnstorableResult`` (``results.result_json``), before anything is written."""
    if wq_settings.CITUS:
        rows = yield settle_citus.complete(ctx, item, result_json(result))
        return _held("complete", item, rows)
    params = CompleteParams(*_fence(item), result_json(result))
    rows = yield Tenant(ctx.org_id, COMPLETE, params)
    return _held("complete", item, rows)


@transition
def fail(
    ctx: OpContext,
    item: WorkItem,
    error: str,
    *,
    permanent: bool = False,
    delay_s: float | None = None,
    traceback: str | None = None,
) -> Plan[WorkItem]:
    """Requeue after ``retry_delay(attempts)`` (or ``delay_s``, when the caller applies its
    own retry policy), or, when attempts are spent or the error is permanent, fail for good: a
    dead letter, with an audit entry written by the same statement, and a metric. Conditioned
    on ``item.claim_token``. ``error`` is stored as storable text (NUL and lone surrogates
    replaced, at most 10,000 characters): what a handler says never stops a settle. The same
    statement records the attempt (``Attempt``: worker, host, start, end, outcome, ``error``
    and ``traceback``, its last 8,192 characters).
    """
    error = storable_text(error)
    trace = storable_traceback(traceback)
    fence = _fence(item)
    if not (permanent or is_exhausted(item.attempts, item.max_attempts)):
        if delay_s is None:
            delay = retry_delay(item.attempts, get_kind(item.kind).retry)
        else:
            delay = _check_delay(delay_s)
        if wq_settings.CITUS:
            rows = yield settle_citus.retry(ctx, item, delay, error, trace)
        else:
            rows = yield Tenant(ctx.org_id, RETRY, RetryParams(*fence, delay, error, trace))
        return _held("fail", item, rows)
    if wq_settings.CITUS:
        rows = yield settle_citus.dead_letter(ctx, item, error, trace, permanent)
    else:
        params = DeadLetterParams(*fence, error, trace, permanent, ctx.user_id, ctx.request_id)
        rows = yield Tenant(ctx.org_id, DEAD_LETTER, params)
    failed = _held("fail", item, rows)
    DEAD_LETTERED.labels(failed.kind).inc()
    return failed


def _check_delay(delay_s: float) -> float:
    """A caller's retry delay in seconds: finite, 0 to a day (a longer wait is a schedule)."""
    delay = float(delay_s)
    if not 0.0 <= delay <= MAX_RETRY_DELAY_S:  # also refuses NaN
        raise ValueError(f"delay_s: must be 0 to {MAX_RETRY_DELAY_S:g} seconds (got {delay_s})")
    return delay


def _give_back(
    transition: str, ctx: OpContext, item: WorkItem, delay_s: float, note: str
) -> Plan[WorkItem]:
    params = GiveBackParams(*_fence(item), max(float(delay_s), 0.0), storable_text(note))
    rows = yield Tenant(ctx.org_id, GIVE_BACK, params)
    return _held(transition, item, rows)


@transition
def defer(ctx: OpContext, item: WorkItem, delay_s: float, note: str = "deferred") -> Plan[WorkItem]:
    """Hand the item back to run after ``delay_s``, giving back the attempt its claim spent."""
    return (yield from _give_back("defer", ctx, item, delay_s, note))


@transition
def release(ctx: OpContext, item: WorkItem, note: str) -> Plan[WorkItem]:
    """Hand the item back to run now (shutdown, a kind this worker does not handle), giving
    back the attempt its claim spent; ``note`` says why."""
    return (yield from _give_back("release", ctx, item, 0.0, note))


@transition
def extend_lease(ctx: OpContext, item: WorkItem, lease_s: float) -> Plan[WorkItem]:
    """Push the lease to ``now() + lease_s``, if ``item.claim_token`` still holds the item."""
    rows = yield Tenant(ctx.org_id, EXTEND_LEASE, ExtendLeaseParams(*_fence(item), float(lease_s)))
    return _held("extend_lease", item, rows)


afail = fail.aio
adefer = defer.aio
arelease = release.aio


# -- many items, across tenants, fenced by (org, id, token) -------------------------------------


class Completed(set[uuid.UUID]):
    """The ids a completion completed; ``fences``: the fences it completed them under. An item
    given twice (a holder that claimed it again, both claims finished) is completed under the
    one that holds it, never the other."""

    def __init__(self, fences: Iterable[Fence] = ()) -> None:
        self._fences = tuple(fences)
        super().__init__(fence.item_id for fence in self._fences)

    @cached_property
    def fences(self) -> frozenset[Fence]:
        # Made when asked: a batch whose every fence was completed needs no set of them.
        return frozenset(self._fences)


@transition
def complete_many(
    fences: Iterable[Fence], results: Sequence[str | None] | None = None
) -> Plan[Completed]:
    """Mark done every fence's item still held under its token, with its result, recording
    each one's attempt in the same statement; returns the ids completed, with the fences
    they were completed under (``Completed.fences``). ``results``: each
    fence's result as JSON text made by ``results.result_json`` (None: none), in the fences'
    order; None when none has one.

    An id missing from the result was refused (a stale holder). Runs on the system login
    across tenants because the token, with the org and the id, is the fence here: no row of
    another tenant can match a token minted for this claim.
    """
    held = list(fences)
    if not held:
        return Completed()
    if results is not None and len(results) != len(held):
        raise ValueError(f"results: {len(results)} for {len(held)} fences")
    # any(): a result's JSON text is never empty.
    texts = TextArray(results) if results is not None and any(results) else None
    rows = yield System(COMPLETE_MANY, CompleteManyParams(*Fences.of(held), texts))
    done = Completed(Fence(*row) for row in rows.rows)
    if len(done) < len(held):  # as many ids as fences: every one completed
        count_refused("complete", len(set(held) - done.fences))
    return done


class Renewed(set[uuid.UUID]):
    """The ids a renewal renewed; ``cancel_requested``: those of them someone asked to cancel
    (``workqueue/cancel.py``), reported by the renewal itself, so the holder learns it without
    a round trip of its own."""

    def __init__(
        self, ids: Iterable[uuid.UUID] = (), cancel_requested: Iterable[uuid.UUID] = ()
    ) -> None:
        super().__init__(ids)
        self.cancel_requested = frozenset(cancel_requested)


@transition
def extend_leases(fences: Iterable[Fence], lease_s: float) -> Plan[Renewed]:
    """Renew the lease of every fence's item still held under its token; returns the ids
    renewed, with those someone asked to cancel (``Renewed.cancel_requested``). Across tenants
    on the system login for the reason ``complete_many`` gives."""
    held = list(fences)
    if not held:
        return Renewed()
    rows = yield System(EXTEND_LEASES, ExtendLeasesParams(*Fences.of(held), float(lease_s)))
    renewed = Renewed(rows.column(0), [row[0] for row in rows.rows if row[1]])
    count_refused("extend_lease", len({f.item_id for f in held} - renewed))
    return renewed


acomplete_many = complete_many.aio
aextend_leases = extend_leases.aio
