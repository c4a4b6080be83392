"""claim: hand pending work to a worker, across tenants, each item under a fresh claim token.

Controls, all held by the claim statement itself: a paused lane or kind (``pause``) is not
claimed; a lane's cap (``WORKQUEUE["LANE_CAPS"]``) and a kind's (``Kind.max_running``) bound
what the lane holds at once (the lane's claims then run one at a time, as with tenant caps); of
the items sharing a ``concurrency_key`` in a tenant, only the first waiting one is claimed, and
only while none is claimed; a rate limit (``rate_limits``) hands out only what it allows now,
the rest stays pending with no attempt spent. In the rare race the unique index on claimed
keys settles (two claimers each saw a different first item), the claim that lost takes nothing
this time: ``[]``, as if the lane were empty, and the next claim tries again.

The statements, and the locking querysets compiled into them: ``workqueue.claim_statements``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence

import psycopg
from django.db import IntegrityError

from tenancy.contexts import OpContext, RequestContext, contexts_from_rows
from tenancy.services import with_cause
from workqueue.claim_citus import (
    CLAIM_TENANT_CITUS,
    DUE_TENANTS_CITUS,
    ClaimTenantParams,
    DueTenantsParams,
)
from workqueue.claim_statements import (
    CAPS_IN_EFFECT,
    CLAIM,
    CLAIM_LIMITED,
    CLAIM_OLDEST_FIRST,
    CLAIM_OLDEST_FIRST_LIMITED,
    CLAIM_ONE,
    FAIL_ORPHANED,
    ONE_CLAIMED_PER_KEY,
    RATE_LIMITS_IN_EFFECT,
    ClaimOldestFirstParams,
    ClaimOneParams,
    ClaimParams,
    FailOrphanedParams,
)
from workqueue.exceptions import Conflict
from workqueue.fence import Fence
from workqueue.inputs import check_lane, storable_text
from workqueue.kinds import all_kinds, known_kinds
from workqueue.metrics import ORPHANED
from workqueue.models import WorkItem
from workqueue.rows import items_of
from wqcore.conf import system_alias, wq_settings
from wqcore.logs import fields_of_item, log_event
from wqcore.statements import NoParams
from wqcore.store import Plan, Rows, System, transition

logger = logging.getLogger(__name__)

ORPHAN_ERROR = "tenant is gone"

# How long a process trusts its last reading of whether any tenant has a cap of its own: a cap
# set in the admin takes effect within this long.
CAPS_CACHE_S = 5.0
_caps = {"capped": False, "read_at": float("-inf")}


# How long a process trusts its last reading of whether any rate limit is set: the first limit
# set (or the last cleared) takes effect within this long; a limit changed while others stand,
# at the next claim (the claim reads the limits themselves).
RATE_LIMITS_CACHE_S = 1.0
_rate_limits = {"set": False, "read_at": float("-inf")}


def forget_caps() -> None:
    """Read whether caps are in effect afresh at the next claim (after setting one)."""
    _caps["read_at"] = float("-inf")


def forget_rate_limits() -> None:
    """Read whether rate limits are set afresh at the next claim (after setting one)."""
    _rate_limits["read_at"] = float("-inf")


def lane_mutex(lane: str) -> str:
    """The mutex that serializes a lane's claims while caps are in effect."""
    return f"workqueue.claim:{lane}"


# The lane's cap (None: none), and the capped kinds with their caps, as two lists.
Caps = tuple[int | None, list[str], list[int]]


def running_caps(lane: str, kinds: Sequence[str]) -> Caps:
    """The lane's cap (``WORKQUEUE["LANE_CAPS"]``) and the caps of the claimed kinds that
    declare one (``Kind.max_running``), as the claim statement takes them."""
    # A kind this process does not know declares no cap here (the claim never refused one).
    known = {k.name: k for k in all_kinds()}
    capped = [
        (name, cap)
        for name in kinds
        if name in known and (cap := known[name].max_running) is not None
    ]
    lane_cap = wq_settings.LANE_CAPS.get(lane)
    return lane_cap, [name for name, _ in capped], [int(cap) for _, cap in capped]


def _key_collision(exc: BaseException) -> bool:
    """Whether ``exc`` is the unique index on claimed keys refusing a claim: two claimers each
    read a different item as its key's first (an item enqueued meanwhile with an earlier
    ``available_at``), and the database let only one through."""
    for err in (exc, exc.__cause__):
        if isinstance(err, psycopg.errors.UniqueViolation):
            return getattr(err.diag, "constraint_name", None) == ONE_CLAIMED_PER_KEY
    return False


def hand_out(
    rctx: RequestContext, rows: Rows
) -> tuple[list[tuple[OpContext, WorkItem]], list[WorkItem]]:
    """Pair each claimed row with the context it runs under, in the order the claim picked
    them; items whose tenant is gone come back separately, to be failed as orphans.

    The claim's rows carry ``tenancy_live`` and ``tenancy_role``, which tenancy turns into the
    context (``contexts_from_rows``), as ``claim_context`` would.
    """
    items = items_of(rows, system_alias())
    live, role = rows.names.index("tenancy_live"), rows.names.index("tenancy_role")
    contexts = contexts_from_rows(
        rctx,
        [
            (i.org_id, i.created_by, row[live], row[role])
            for i, row in zip(items, rows.rows, strict=True)
        ],
    )
    # The rows come in the order the claim picked them (each claim statement ends by ordering
    # them: the fair order's turn, then what the fallback took; or priority, then age).
    claimed, orphans = [], []
    # Items enqueued by one request share their context: made once per author and request.
    caused: dict[tuple[uuid.UUID, str, uuid.UUID | None], OpContext] = {}
    for item in items:
        key = (item.org_id, item.created_by, item.request_id)
        ctx = caused.get(key)
        if ctx is None:
            author = contexts.get((item.org_id, item.created_by))
            if author is None:
                orphans.append(item)
                continue
            ctx = caused[key] = with_cause(author, item.request_id)
        claimed.append((ctx, item))
    return claimed, orphans


class Claimed(list[tuple[OpContext, WorkItem]]):
    """The claimed items with their contexts, in the order the claim picked them; and, from a
    claim that came back short while a rate limit held items back, ``rate_wait_s``: in how
    many seconds (from when the claim began, by the database's clock) the soonest of those
    limits allows one more (None: no limit held any back, or the claim was full)."""

    rate_wait_s: float | None = None


def _rate_wait(rows: Rows) -> tuple[Rows, float | None]:
    """The claim's rows without the rate limits' column, and its value: every row carries it,
    and a claim that took nothing returns one row with it alone (dropped here)."""
    at = rows.names.index("rate_wait_s")
    wait_s = rows.rows[0][at] if rows.rows else None
    item_id = rows.names.index("id")
    return Rows(rows.names, [row for row in rows.rows if row[item_id] is not None]), wait_s


def _count_orphan(item: WorkItem) -> None:
    ORPHANED.labels(item.kind).inc()
    log_event(logger, logging.WARNING, "work_orphaned", **fields_of_item(item))


def _handed_out(rctx: RequestContext, rows: Rows) -> Plan[list[tuple[OpContext, WorkItem]]]:
    """The claimed items with their contexts (``hand_out``), after failing those whose tenant
    is gone (another claimer may have failed one first: either way it does not run)."""
    claimed, orphans = hand_out(rctx, rows)
    for item in orphans:
        fence = Fence.of(item)  # a claimed row: it holds its claim token
        params = FailOrphanedParams(fence.item_id, fence.claim_token, ORPHAN_ERROR)
        yield System(FAIL_ORPHANED, params)
        _count_orphan(item)
    return claimed


def _tenant_capped() -> Plan[bool]:
    """Whether a tenant's in-flight cap is in effect (``WORKQUEUE["MAX_IN_FLIGHT"]``, or any
    tenant's own share, read at most every ``CAPS_CACHE_S``)."""
    if wq_settings.MAX_IN_FLIGHT is not None:
        return True
    if time.monotonic() - _caps["read_at"] > CAPS_CACHE_S:
        found = yield System(CAPS_IN_EFFECT, NoParams())
        _caps.update(capped=bool(found.rows[0][0]), read_at=time.monotonic())
    return bool(_caps["capped"])


def _rate_limited() -> Plan[bool]:
    """Whether any rate limit is set (read at most every ``RATE_LIMITS_CACHE_S``): the claim
    then runs with the rate limits' parts, and without them costs what it did."""
    if time.monotonic() - _rate_limits["read_at"] > RATE_LIMITS_CACHE_S:
        found = yield System(RATE_LIMITS_IN_EFFECT, NoParams())
        _rate_limits.update(set=bool(found.rows[0][0]), read_at=time.monotonic())
    return bool(_rate_limits["set"])


def _commit_mode() -> str:
    """The claim's ``synchronous_commit`` (``WORKQUEUE["CLAIM_DURABLE"]``)."""
    return "on" if wq_settings.CLAIM_DURABLE else "off"


def _one_may_go(caps: Caps) -> bool:
    """Whether a woken claim may try its own statement (``claim_one``): no cap this process
    knows of holds the lane (the lane's, a kind's: ``caps``, from ``running_caps``; the default
    tenant cap of the fair claim). A tenant's own cap and the rate limits are the statement's
    to check."""
    lane_cap, capped_kinds, _ = caps
    tenant_cap = wq_settings.FAIR_CLAIM and wq_settings.MAX_IN_FLIGHT is not None
    return lane_cap is None and not capped_kinds and not tenant_cap


def _claim_one(
    rctx: RequestContext, lane: str, kinds: list[str], holder: tuple[str, float]
) -> Plan[Claimed | None]:
    """The woken claim's own statement: the first due item alone, with no reading of the
    controls before it. None when a rate limit or a tenant's cap held it back (it took
    nothing): the claim that counts them goes next. Either way the process now knows whether
    they are in effect, as of this statement (the caches ``_tenant_capped`` and
    ``_rate_limited`` read)."""
    worker_id, lease_s = holder
    fair = wq_settings.FAIR_CLAIM
    params = ClaimOneParams(lane, kinds, worker_id, float(lease_s), _commit_mode(), fair)
    rows = yield from _claim_rows(System(CLAIM_ONE, params), lane, worker_id)
    if rows is None:
        return Claimed()
    if not rows.rows:
        # Nothing due, and nothing held back: no limit is set, no tenant capped.
        _remember(rate_limited=False, tenant_capped=False)
        return Claimed()
    names = rows.names
    first = rows.rows[0]
    rate_limited, tenant_capped = (
        first[names.index("rate_limited")],
        first[names.index("tenant_capped")],
    )
    _remember(rate_limited=rate_limited, tenant_capped=tenant_capped)
    if rate_limited or (fair and tenant_capped):
        return None
    return Claimed((yield from _handed_out(rctx, rows)))


def _remember(*, rate_limited: bool, tenant_capped: bool) -> None:
    """What a claim just read of the controls, for the claims after it."""
    now = time.monotonic()
    _rate_limits.update(set=rate_limited, read_at=now)
    _caps.update(capped=tenant_capped, read_at=now)


def _held_back_known() -> bool:
    """Whether this process read, within its caches' time, that a rate limit is set or (for
    the fair claim) a tenant's cap stands: a woken claim then goes straight to the claim that
    counts them, not by ``claim_one`` first."""
    now = time.monotonic()
    rate = _rate_limits["set"] and now - _rate_limits["read_at"] <= RATE_LIMITS_CACHE_S
    capped = _caps["capped"] and now - _caps["read_at"] <= CAPS_CACHE_S
    return bool(rate or (wq_settings.FAIR_CLAIM and capped))


def _claim_rows(step: System, lane: str, worker_id: str) -> Plan[Rows | None]:
    """The claim statement's rows; None when the unique index on claimed keys refused it (two
    claimers each read a different item as its key's first): the claim that lost takes nothing
    this time, as if the lane were empty, and the next claim tries again."""
    try:
        rows: Rows = yield step
    except (IntegrityError, psycopg.errors.UniqueViolation) as exc:
        if not _key_collision(exc):
            raise
        logger.info("claim_key_collision lane=%s worker=%s", lane, worker_id)
        return None
    return rows


def _claim_step(
    lane: str,
    kinds: list[str],
    holder: tuple[str, float],
    limit: int,
    first_alone: bool,
    controls: tuple[bool, bool],
    caps: Caps,
) -> System:
    """The claim statement to run: the fair one, or the card's order across tenants (the
    first item alone, or fairness off); serialized on the lane's mutex while a cap is in
    effect. ``holder``: the worker's id and its lease; ``controls``: whether a tenant's cap is
    in effect, whether a rate limit is set; ``caps``: the lane's and kinds' (``running_caps``)."""
    tenant_capped, rate_limited = controls
    worker_id, lease_s = holder
    commit = _commit_mode()
    lane_cap, capped_kinds, _ = caps
    # Lane and kind caps: the claim counts what the lane holds, one claimer at a time.
    run_capped = lane_cap is not None or bool(capped_kinds)
    common = (lane, kinds, worker_id, float(lease_s), 1 if first_alone else int(limit), commit)
    if first_alone or not wq_settings.FAIR_CLAIM:
        return System(
            CLAIM_OLDEST_FIRST_LIMITED if rate_limited else CLAIM_OLDEST_FIRST,
            ClaimOldestFirstParams(*common, run_capped, *caps),
            serialize=lane_mutex(lane) if run_capped else None,
        )
    # A cap holds across claimers only if they count in turn: while any cap is in effect the
    # lane's claims take its mutex, so each counts what the one before it claimed.
    capped = tenant_capped or run_capped
    return System(
        CLAIM_LIMITED if rate_limited else CLAIM,
        ClaimParams(*common, capped, wq_settings.MAX_IN_FLIGHT, *caps),
        serialize=lane_mutex(lane) if capped else None,
    )


@transition
def claim(
    rctx: RequestContext,
    lane: str,
    kinds: Sequence[str] | None,
    worker_id: str,
    lease_s: float,
    limit: int = 1,
    *,
    woken: bool = False,
) -> Plan[Claimed]:
    """Claim up to ``limit`` due pending items of ``lane`` and ``kinds`` (None: every
    registered kind).

    One statement finds the tenants with work in the lane and takes their items round-robin
    (weighted by each tenant's share, within its in-flight cap, a higher priority first
    whatever its tenant), locks them (``select_for_update(skip_locked=True)``), mints a claim
    token each, sets ``lease_expires_at = now() + lease_s`` and spends one
    attempt, counted here so a worker that dies on a poison item still runs out of attempts;
    by default it commits durably before any handler runs (``WORKQUEUE["CLAIM_DURABLE"]``). Each
    item comes with the context tenancy builds for it (its enqueuer's, or its tenant's
    service context, naming the item's request as the cause), read by the same statement. An
    item whose tenant is gone is failed by ``fail_orphaned``, never returned. The controls
    (pauses, caps, concurrency keys): the module's docstring.

    While a rate limit is set, a claim that comes back short because a limit held items back
    says in ``rate_wait_s`` when the soonest such limit allows one more (``Claimed``).

    ``woken``: the claimer was idle (its last claim found less than it asked) and was woken by a
    notice: with no backlog to share out, the first due item is claimed alone, highest priority
    then oldest across tenants, by its own statement (``claim_one``: it reads whether a rate
    limit or a tenant's cap is in effect itself, and takes nothing when one is); while one is,
    or a lane's or kind's cap, by the claim of one item that counts them (a tenant's cap: the
    fair claim); the claim after it is fair again.

    Takes no tenant: a worker serves every tenant's queue, so the claim reads across tenants on
    the system login, and each item comes back with the tenant it belongs to.
    """
    kinds = known_kinds() if kinds is None else list(kinds)
    if limit < 1 or not kinds:
        return Claimed()
    lane = check_lane(lane)
    if wq_settings.CITUS:
        return (yield from _claim_by_tenant(rctx, lane, kinds, (worker_id, lease_s), limit))
    caps = running_caps(lane, kinds)
    if woken:
        one = yield from _first_alone(rctx, lane, kinds, (worker_id, lease_s), caps)
        if one is not None:
            return one
    # Tenant caps: only the fair claim counts them.
    tenant_capped = (yield from _tenant_capped()) if wq_settings.FAIR_CLAIM else False
    # Woken from idle, the round-robin has nothing to choose between: the first item goes
    # without the fair claim's walk over the tenants (the larger part of a wake's claim).
    first_alone = woken and not tenant_capped
    rate_limited = yield from _rate_limited()
    controls = (tenant_capped, rate_limited)
    step = _claim_step(lane, kinds, (worker_id, lease_s), limit, first_alone, controls, caps)
    found = yield from _claim_rows(step, lane, worker_id)
    if found is None:
        return Claimed()
    rows = found
    rate_wait_s = None
    if rate_limited:
        rows, rate_wait_s = _rate_wait(rows)
    claimed = Claimed((yield from _handed_out(rctx, rows)) if rows.rows else ())
    claimed.rate_wait_s = rate_wait_s
    return claimed


aclaim = claim.aio


def _claim_by_tenant(
    rctx: RequestContext, lane: str, kinds: list[str], holder: tuple[str, float], limit: int
) -> Plan[Claimed]:
    """The claim on Citus: the tenants with due work, read without a lock on the coordinator
    (``due_tenants_citus``), then each one's items claimed by a statement Citus routes to the
    node holding that tenant (``claim_tenant_citus``), until ``limit`` are claimed. The fence,
    the attempt and the lease are written as the single server's claim writes them; pauses and
    each tenant's cap hold; the lanes' and kinds' caps, rate limits and the fair order between
    tenants are not applied yet."""
    worker_id, lease_s = holder
    due: Rows = yield System(DUE_TENANTS_CITUS, DueTenantsParams(lane, kinds, limit))
    handed: list[tuple[OpContext, WorkItem]] = []
    for (org_id,) in due.rows:
        want = limit - len(handed)
        if want < 1:
            break
        seed = uuid.uuid4().hex
        params = ClaimTenantParams(
            org_id, lane, kinds, worker_id, lease_s, want, seed, wq_settings.MAX_IN_FLIGHT
        )
        rows = yield from _claim_rows(System(CLAIM_TENANT_CITUS, params), lane, worker_id)
        if rows is not None and rows.rows:
            handed.extend((yield from _handed_out(rctx, rows)))
    return Claimed(handed)


def _first_alone(
    rctx: RequestContext, lane: str, kinds: list[str], holder: tuple[str, float], caps: Caps
) -> Plan[Claimed | None]:
    """The woken claim by ``claim_one``, where it may go (``_one_may_go``, and no limit or cap
    known to hold items back); None where it may not, or it took nothing because one holds."""
    if not _one_may_go(caps) or _held_back_known():
        return None
    return (yield from _claim_one(rctx, lane, kinds, holder))


@transition
def claim_first(
    rctx: RequestContext, lane: str, kinds: Sequence[str], worker_id: str, lease_s: float
) -> Plan[Claimed | None]:
    """A woken claim by its own statement alone (``claim_one``: the first due item of the lane
    and ``kinds``, highest priority then oldest across tenants), as ``claim(woken=True)``
    starts; None where that claim would go on to the claim that counts a cap or a rate limit
    (one is in effect): the caller then claims by ``claim(woken=True)``. For the listener's
    thread (``workers.woken``), which sends only this statement."""
    kinds = list(kinds)
    if not kinds:
        return Claimed()
    if wq_settings.CITUS:  # no claim across tenants there: claim(woken=True) claims per tenant
        return None
    lane = check_lane(lane)
    return (
        yield from _first_alone(rctx, lane, kinds, (worker_id, lease_s), running_caps(lane, kinds))
    )


@transition
def fail_orphaned(item_id: uuid.UUID, claim_token: uuid.UUID, error: str) -> Plan[WorkItem]:
    """Fail for good an item whose tenant is gone, if ``claim_token`` still holds it.

    Takes no tenant: the tenant is gone, so no tenant context can be built for it; the claim
    token is the fence. No audit entry, since no tenant is left to hold one.
    """
    params = FailOrphanedParams(item_id, claim_token, storable_text(error))
    rows: Rows = yield System(FAIL_ORPHANED, params)
    if not rows.rows:
        raise Conflict(f"work item {item_id} is no longer held under this claim token")
    return items_of(rows, system_alias())[0]
