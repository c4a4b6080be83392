"""The sweep's operations on work items: requeue stale claims, purge old items, read gauges."""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

from django.db.models import DateTimeField, Field, Value
from django.db.models.functions import Coalesce, Now

from audit.api import APPEND_ENTRIES
from tenancy.contexts import OpContext, RequestContext
from workqueue import SQL_DIR, settle_citus
from workqueue.dependents import RELEASE_ENDED
from workqueue.lanes import declared_lanes
from workqueue.lookups import AnyOf
from workqueue.metrics import DEAD_LETTERED
from workqueue.models import AttemptOutcome, Status, WorkItem
from workqueue.ready import READY_ROWS
from workqueue.rows import items_of
from workqueue.settle import RECORD_ATTEMPTS
from wqcore.conf import wq_settings
from wqcore.logs import fields_of_item, log_event
from wqcore.statements import Locking, NoParams, Statement, locking, sql_literal
from wqcore.store import Plan, Rows, System, Tenant, transition

logger = logging.getLogger(__name__)


class RequeueStaleParams(NamedTuple):
    # Leases that passed before this moment (None: the database's now()).
    before: datetime | None
    limit: int
    # Who the audit entry of a dead-lettered item names: the sweep's service context.
    actor: str
    request_id: uuid.UUID


class RequeueStaleCitusParams(NamedTuple):
    org_id: uuid.UUID
    before: datetime | None
    limit: int


class RequeueHeldCitusParams(NamedTuple):
    org_id: uuid.UUID
    holders: list[str]
    before: datetime
    limit: int


class RequeueHeldParams(NamedTuple):
    # The gone holders (worker ids) whose items go back, and only those they claimed before
    # this moment (a holder that came back claims anew after it).
    holders: list[str]
    before: datetime
    limit: int
    actor: str
    request_id: uuid.UUID


class StaleTenantsParams(NamedTuple):
    limit: int


class PurgeItemsParams(NamedTuple):
    statuses: list[str]
    before: datetime
    batch: int


class PurgeItemsCitusParams(NamedTuple):
    org_id: uuid.UUID
    statuses: list[str]
    before: datetime
    batch: int


class PurgeTenantsParams(NamedTuple):
    statuses: list[str]
    before: datetime
    limit: int


# Sentinels the locking querysets are compiled with; each becomes a named parameter.
_BEFORE = datetime(1, 1, 1, 0, 0, 0, 424242, tzinfo=UTC)
_STATUSES = ("\x00statuses",)
_HOLDERS = ("\x00holders",)
_LIMIT = 987_654_321
_ORG = uuid.UUID(int=0x424242)


def _stale_locking(by_tenant: bool = False) -> Locking:
    """The tenant's claimed items whose lease passed, oldest lease first, locked with
    ``select_for_update(skip_locked=True)`` (a holder settling one now wins; it is skipped).
    ``by_tenant``: the tenant named too (Citus routes by it; row-level security alone cannot)."""
    before = Coalesce(Value(_BEFORE, output_field=DateTimeField()), Now())
    found = WorkItem.objects.filter(status=Status.CLAIMED, lease_expires_at__lt=before)
    slots: dict[Any, str] = {_BEFORE: "before"}
    if by_tenant:
        found, slots = found.filter(org_id=_ORG), {**slots, _ORG: "org_id"}
    queryset = (
        found.order_by("lease_expires_at")
        .select_for_update(skip_locked=True)
        .values("id", "claimed_by")[:_LIMIT]
    )
    return locking(queryset, slots, "limit")


# The rescue names its gone holders in one array parameter, whatever their number.
cast("Field[Any, Any]", WorkItem._meta.get_field("claimed_by")).register_lookup(AnyOf)


def _held_locking(by_tenant: bool = False) -> Locking:
    """The tenant's claimed items of the given holders claimed before ``before``, oldest lease
    first, locked with ``select_for_update(skip_locked=True)``; ``by_tenant`` as above."""
    found = WorkItem.objects.filter(
        status=Status.CLAIMED, claimed_by__any_of=_HOLDERS, claimed_at__lt=_BEFORE
    )
    slots: dict[Any, str] = {_HOLDERS: "holders", _BEFORE: "before"}
    if by_tenant:
        found, slots = found.filter(org_id=_ORG), {**slots, _ORG: "org_id"}
    queryset = (
        found.order_by("lease_expires_at")
        .select_for_update(skip_locked=True)
        .values("id", "claimed_by")[:_LIMIT]
    )
    return locking(queryset, slots, "limit")


def _purge_locking(by_tenant: bool = False) -> Locking:
    """Finished items of the given statuses last changed before ``before``, locked with
    ``select_for_update(skip_locked=True)``; ``by_tenant`` as above."""
    found = WorkItem.objects.filter(status__any_of=_STATUSES, updated_at__lt=_BEFORE)
    slots: dict[Any, str] = {_STATUSES: "statuses", _BEFORE: "before"}
    if by_tenant:
        found, slots = found.filter(org_id=_ORG), {**slots, _ORG: "org_id"}
    queryset = found.select_for_update(skip_locked=True).values("id")[:_LIMIT]
    return locking(queryset, slots, "batch")


# The statuses of ended items: the only ones the purge deletes.
PURGEABLE = frozenset({Status.DONE, Status.FAILED, Status.DISCARDED, Status.CANCELLED})

# What the hand-back writes beside the items: a dead letter's audit entry, each attempt it ends,
# and the waiting items its dead letters and cancels release.
_REQUEUE_INCLUDES = (APPEND_ENTRIES, RECORD_ATTEMPTS, RELEASE_ENDED, READY_ROWS)
REQUEUE_STALE = Statement(
    "requeue_stale",
    RequeueStaleParams,
    SQL_DIR,
    includes=_REQUEUE_INCLUDES,
    build_locking=lambda: {"locking": _stale_locking()},
    build_parts=lambda: _cause(AttemptOutcome.LEASE_EXPIRED, "lease expired"),
)
# The same statement over the items of holders that are gone (the sweep's rescue): the hand-back
# is an expired lease's in every way but what picks the items and what the attempt says.
REQUEUE_HELD = Statement(
    "requeue_stale",
    RequeueHeldParams,
    SQL_DIR,
    includes=_REQUEUE_INCLUDES,
    build_locking=lambda: {"locking": _held_locking()},
    build_parts=lambda: _cause(AttemptOutcome.HOLDER_GONE, "holder gone"),
)
# The Citus forms (WORKQUEUE["CITUS"]): the hand-back alone, routed by the tenant it names; what
# it writes beside the items follows in the same transaction (settle_citus.requeued).
REQUEUE_STALE_CITUS = Statement(
    "requeue_citus",
    RequeueStaleCitusParams,
    SQL_DIR,
    build_locking=lambda: {"locking": _stale_locking(by_tenant=True)},
    build_parts=lambda: _cause(AttemptOutcome.LEASE_EXPIRED, "lease expired"),
)
REQUEUE_HELD_CITUS = Statement(
    "requeue_citus",
    RequeueHeldCitusParams,
    SQL_DIR,
    build_locking=lambda: {"locking": _held_locking(by_tenant=True)},
    build_parts=lambda: _cause(AttemptOutcome.HOLDER_GONE, "holder gone"),
)
STALE_TENANTS = Statement("stale_tenants", StaleTenantsParams, SQL_DIR)
PURGE_ITEMS = Statement(
    "purge_items", PurgeItemsParams, SQL_DIR, build_locking=lambda: {"locking": _purge_locking()}
)
# Its Citus form: the tenants with items to purge read without a lock, then each one's purged
# on its node.
PURGE_TENANTS = Statement("purge_tenants", PurgeTenantsParams, SQL_DIR)
PURGE_ITEMS_CITUS = Statement(
    "purge_items_citus",
    PurgeItemsCitusParams,
    SQL_DIR,
    build_locking=lambda: {"locking": _purge_locking(by_tenant=True)},
)


class LanesParams(NamedTuple):
    # The declared lanes (workqueue.lanes): any other is counted as one, UNDECLARED.
    lanes: list[str]


def _cause(outcome: str, error: str) -> dict[str, str]:
    return {"outcome": sql_literal(str(outcome)), "cause": sql_literal(error)}


READ_GAUGES = Statement("read_gauges", LanesParams, SQL_DIR)
READ_TOP_TENANTS = Statement("read_top_tenants", LanesParams, SQL_DIR)
READ_AUTOVACUUM = Statement("read_autovacuum", NoParams, SQL_DIR)


@dataclass(frozen=True)
class Requeued:
    requeued: int
    dead_lettered: int
    # Items someone asked to cancel whose holder died: ended cancelled, not handed back.
    cancelled: int = 0
    # The items this call moved, as the statement left them (for the sweep's signals and logs).
    items: tuple[WorkItem, ...] = field(default=(), compare=False, repr=False)


@transition
def requeue_stale(
    ctx: OpContext, before: datetime | None = None, limit: int = 1000
) -> Plan[Requeued]:
    """Hand back the tenant's claimed items whose lease passed before ``before`` (default: the
    database's ``now()``), at most ``limit``. One whose attempts are spent is dead-lettered
    instead, with an audit entry written by the same statement, so a poison item that crashes
    its worker every time ends; one someone asked to cancel ends cancelled.
    """
    if wq_settings.CITUS:
        citus = RequeueStaleCitusParams(ctx.org_id, before, int(limit))
        rows: Rows = yield settle_citus.requeued(
            ctx, REQUEUE_STALE_CITUS, citus, AttemptOutcome.LEASE_EXPIRED
        )
    else:
        params = RequeueStaleParams(before, int(limit), ctx.user_id, ctx.request_id)
        rows = yield Tenant(ctx.org_id, REQUEUE_STALE, params)
    result = _requeued(settle_citus.without_holders(rows))
    _log_requeued(ctx, result, AttemptOutcome.LEASE_EXPIRED, "stale_requeued")
    return result


@transition
def requeue_held(
    ctx: OpContext, holders: list[str], before: datetime, limit: int = 1000
) -> Plan[Requeued]:
    """Hand back the tenant's claimed items held by ``holders`` (workers known to be gone)
    that they claimed before ``before``, at most ``limit``, as an expired lease's are: the
    attempt spent, a dead letter when attempts are spent, cancelled when someone asked; the
    attempt recorded as ``holder_gone``. The claim token fences whatever a holder that was not
    gone after all writes later."""
    if wq_settings.CITUS:
        citus = RequeueHeldCitusParams(ctx.org_id, list(holders), before, int(limit))
        rows: Rows = yield settle_citus.requeued(
            ctx, REQUEUE_HELD_CITUS, citus, AttemptOutcome.HOLDER_GONE
        )
    else:
        params = RequeueHeldParams(list(holders), before, int(limit), ctx.user_id, ctx.request_id)
        rows = yield Tenant(ctx.org_id, REQUEUE_HELD, params)
    result = _requeued(settle_citus.without_holders(rows))
    _log_requeued(ctx, result, AttemptOutcome.HOLDER_GONE, "held_requeued")
    return result


def _requeued(rows: Rows) -> Requeued:
    moved = items_of(rows)
    dead = [item for item in moved if item.status == Status.FAILED]
    for item in dead:
        DEAD_LETTERED.labels(item.kind).inc()
    cancelled = sum(1 for item in moved if item.status == Status.CANCELLED)
    return Requeued(
        requeued=len(moved) - len(dead) - cancelled,
        dead_lettered=len(dead),
        cancelled=cancelled,
        items=tuple(moved),
    )


def _log_requeued(ctx: OpContext, result: Requeued, outcome: str, event: str) -> None:
    for item in result.items:
        if item.status == Status.FAILED:
            log_event(
                logger,
                logging.WARNING,
                "item_dead_lettered",
                **fields_of_item(item),
                error=item.last_error,
                outcome=str(outcome),
            )
    if result.items:
        log_event(
            logger,
            logging.INFO,
            event,
            tenant=str(ctx.org_id),
            requeued=result.requeued,
            dead_lettered=result.dead_lettered,
            cancelled=result.cancelled,
        )


@transition
def stale_tenants(limit: int = 1000) -> Plan[list[uuid.UUID]]:
    """The tenants holding claimed items whose lease passed (at most ``limit``).

    Takes no tenant: it finds which tenants the sweep must visit, so it reads across tenants
    on the system login; the requeue itself then runs under each tenant.
    """
    rows = yield System(STALE_TENANTS, StaleTenantsParams(int(limit)))
    return rows.column(0)


@transition
def purge_items(
    rctx: RequestContext,
    before: datetime,
    batch: int = 1000,
    max_batches: int = 100,
    statuses: tuple[str, ...] = (Status.DONE, Status.FAILED),
) -> Plan[int]:
    """Delete items of ``statuses`` (done and failed by default) last changed before
    ``before``, in every tenant; returns how many. Bounded: batches of ``batch``, at most
    ``max_batches`` per call; it stops early when a batch comes back smaller than ``batch``.

    Only ended items are purged (``PURGEABLE``): an item still to run (a step waiting for its
    parents, above all) never is, whatever ``statuses`` says.

    Takes no tenant: retention is the operator's rule for the whole table, and one statement
    per batch across tenants is what keeps the purge cheap; runs on the system login.
    """
    unended = sorted(set(statuses) - PURGEABLE)
    if unended:
        raise ValueError(f"statuses: only ended items are purged, not {', '.join(unended)}")
    named = [str(s) for s in statuses]
    steps: list[Callable[[], System]] = []
    if wq_settings.CITUS:
        # No more tenants than batches a call may run: each costs one at least.
        limit = int(max_batches)
        tenants = yield System(PURGE_TENANTS, PurgeTenantsParams(named, before, limit))
        for (org_id,) in tenants.rows:
            params = PurgeItemsCitusParams(org_id, named, before, int(batch))
            steps.append(functools.partial(System, PURGE_ITEMS_CITUS, params))
    else:
        steps.append(
            functools.partial(System, PURGE_ITEMS, PurgeItemsParams(named, before, int(batch)))
        )
    total, budget = 0, int(max_batches)
    for step in steps:  # each tenant's on Citus, else every tenant's at once
        while budget > 0:
            budget -= 1
            rows = yield step()
            deleted = rows.rows[0][0]
            total += deleted
            if deleted < batch:
                break  # a short batch: nothing more is old enough
    if total:
        log_event(
            logger,
            logging.INFO,
            "items_purged",
            count=total,
            statuses=",".join(statuses),
            before=before.isoformat(),
        )
    return total


@transition
def autovacuum_on() -> Plan[bool]:
    """Whether autovacuum reclaims the work item table's dead rows (the server's setting and
    the table's own). The purge deletes finished items; only VACUUM makes their space and their
    index entries reusable, and a claim walks the entries no vacuum has removed."""
    rows = yield System(READ_AUTOVACUUM, NoParams())
    return bool(rows.rows[0][0])


@dataclass(frozen=True)
class Gauges:
    # Seconds the oldest due pending item has waited (0 when none waits).
    oldest_age_s: float
    failed: int
    # (lane, kind, status) -> count
    counts: dict[tuple[str, str, str], int] = field(default_factory=dict)


def read_gauges_plan() -> Plan[Gauges]:
    """``read_gauges``' plan (``figures.read_gauges_of`` runs it for one tenant too)."""
    rows = yield System(READ_GAUGES, LanesParams(declared_lanes()))
    counts = {(lane, kind, status): n for lane, kind, status, n, _ in rows.rows}
    ages = [float(age) for *_, age in rows.rows if age is not None]
    return Gauges(
        oldest_age_s=max(ages, default=0.0),
        failed=sum(n for (_, _, status), n in counts.items() if status == Status.FAILED),
        counts=counts,
    )


@transition
def read_gauges(rctx: RequestContext) -> Plan[Gauges]:
    """The queue's gauges in one statement: the oldest waiting item's age, the failed count,
    and counts by lane, kind and status.

    Takes no tenant: the gauges describe the whole queue for the operator, so they read across
    tenants on the system login.
    """
    return (yield from read_gauges_plan())


@dataclass(frozen=True)
class TenantDepth:
    """One of a lane's ten deepest tenants: its pending items and its oldest due item's age."""

    lane: str
    org_id: uuid.UUID
    items: int
    oldest_age_s: float
    rank: int


@transition
def read_top_tenants() -> Plan[list[TenantDepth]]:
    """Each lane's ten deepest tenants (at most ten per lane, never one row per tenant).

    Takes no tenant: it compares tenants for the operator, so it reads across them on the
    system login.
    """
    rows = yield System(READ_TOP_TENANTS, LanesParams(declared_lanes()))
    return [
        TenantDepth(lane, org_id, items, oldest or 0.0, rank)
        for lane, org_id, items, oldest, rank in rows.rows
    ]
