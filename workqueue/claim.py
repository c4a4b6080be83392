"""claim: hand pending work to a worker, across tenants, each item under a fresh claim token."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import NamedTuple

import psycopg
from django.db import IntegrityError
from django.db.models import Exists, OuterRef, Q, Subquery
from django.db.models.functions import Now

from tenancy.contexts import OpContext, RequestContext, contexts_from_rows
from tenancy.modes import claim_contexts_sql
from tenancy.services import with_cause
from workqueue import SQL_DIR
from workqueue.exceptions import Conflict
from workqueue.inputs import check_lane, storable_text
from workqueue.kinds import all_kinds, known_kinds
from workqueue.lookups import AnyOf
from workqueue.metrics import ORPHANED
from workqueue.models import Status, WorkItem
from workqueue.rows import items_of
from wqcore.conf import system_alias, wq_settings
from wqcore.logs import fields_of_item, log_event
from wqcore.statements import Locking, NoParams, Statement, locking
from wqcore.store import Plan, Rows, System, arun, run

logger = logging.getLogger(__name__)

ORPHAN_ERROR = "tenant is gone"

for _field in ("id", "kind", "status"):
    WorkItem._meta.get_field(_field).register_lookup(AnyOf)


class ClaimParams(NamedTuple):
    lane: str
    kinds: list[str]
    worker_id: str
    lease_s: float
    limit: int
    # 'on': the claim (and the attempt it spends) is durable before any handler runs.
    synchronous_commit: str
    # Whether any tenant's in-flight cap is in effect (then the claim counts what each holds).
    capped: bool
    # The cap of a tenant without one of its own (None: no cap).
    default_cap: int | None
    # The lane's cap (WORKQUEUE["LANE_CAPS"]; None: none), and each capped kind's
    # (Kind.max_running), as two arrays of the same length.
    lane_cap: int | None
    capped_kinds: list[str]
    kind_caps: list[int]


class ClaimControlsParams(NamedTuple):
    """The parameters the claim's controls read (``sql/claim_controls.sql``, included by both
    claims)."""

    lane: str
    kinds: list[str]
    limit: int
    lane_cap: int | None
    capped_kinds: list[str]
    kind_caps: list[int]


class ClaimOldestFirstParams(NamedTuple):
    lane: str
    kinds: list[str]
    worker_id: str
    lease_s: float
    limit: int
    synchronous_commit: str
    # Whether the lane's or a kind's cap is in effect (then the claim counts what the lane holds).
    capped: bool
    lane_cap: int | None
    capped_kinds: list[str]
    kind_caps: list[int]


class FailOrphanedParams(NamedTuple):
    id: uuid.UUID
    claim_token: uuid.UUID
    error: str


# Sentinels the locking querysets are compiled with; each becomes a named parameter (or, for
# the candidates, the statement's own list of them).
_LANE, _KINDS, _LIMIT = "\x00lane", ("\x00kinds",), 987_654_321
_TAKEN = ("\x00taken",)
_ORG = uuid.UUID(int=0x0F0F0F0F)
# The kinds the claim may take: the statement's own (not paused, below their cap).
_ALLOWED_KINDS = "(SELECT kinds FROM allowed)::text[]"
# The constraint that refuses a second claimed item of a (tenant, concurrency key).
ONE_CLAIMED_PER_KEY = "workitem_one_claimed_per_key"


def _key_free() -> Q:
    """An item without a concurrency key, or the first waiting item of its key (in claim
    order: priority, then age, then id) while no item of its tenant with that key is claimed.
    Read in the claim's snapshot; two claimers that each believed they held the first are
    settled by the unique index on claimed keys (the second claim is refused, see ``claim``)."""
    key = {"org_id": OuterRef("org_id"), "concurrency_key": OuterRef("concurrency_key")}
    # Spelled with the unique index's predicate, so the planner reads that index (claimed,
    # keyed rows only), whether it probes it per candidate or hashes it once.
    held = WorkItem.objects.filter(status=Status.CLAIMED, concurrency_key__isnull=False, **key)
    first = (
        WorkItem.objects.filter(status=Status.PENDING, available_at__lte=Now(), **key)
        .order_by("-priority", "available_at", "id")
        .values("id")[:1]
    )
    # The held check first: one probe of the unique index, and when the key is held the
    # first-item subquery is not run at all.
    return Q(concurrency_key__isnull=True) | (~Exists(held) & Q(id=Subquery(first)))


def _claim_locking() -> Locking:
    """The card's claim, run once per tenant with work: its pending, due items of the lane
    and kinds, highest priority then oldest first, locked with
    ``select_for_update(skip_locked=True)``, so claimers never wait on each other and a row
    another claimer holds is passed over for the next one. Compiled once into the claim
    statement (an UPDATE around it, one round trip per batch) rather than evaluated, which
    would cost a round trip for the ids and another for the update."""
    queryset = (
        WorkItem.objects.filter(
            status=Status.PENDING,
            lane=_LANE,
            org_id=_ORG,
            available_at__lte=Now(),
            kind__any_of=_KINDS,
        )
        .filter(_key_free())
        .order_by("-priority", "available_at")
        .select_for_update(skip_locked=True)
        .values("id", "kind", "priority", "available_at")[:_LIMIT]
    )
    # The tenant and its share of the batch come from the statement's own offers (o).
    return locking(
        queryset,
        {_LANE: "lane"},
        "limit",
        {_ORG: "o.org_id", _KINDS: _ALLOWED_KINDS},
        "o.items",
    )


def _oldest_first_locking() -> Locking:
    """The claim with fairness off: pending, due items of the lane and kinds, highest priority
    then oldest first across tenants, ``select_for_update(skip_locked=True)``."""
    queryset = (
        WorkItem.objects.filter(
            status=Status.PENDING, lane=_LANE, available_at__lte=Now(), kind__any_of=_KINDS
        )
        .filter(_key_free())
        .order_by("-priority", "available_at")
        .select_for_update(skip_locked=True)
        .values("id", "kind", "priority", "available_at")[:_LIMIT]
    )
    return locking(
        queryset,
        {_LANE: "lane"},
        "limit",
        {_KINDS: _ALLOWED_KINDS},
        limit_sql="LEAST(%(limit)s::integer, (SELECT room FROM allowed))",
    )


def _fallback_locking() -> Locking:
    """When other claimers hold the fair order's offers (they computed the same ones), the
    claim fills the rest of its batch in priority then age order from what nobody holds,
    ``select_for_update(skip_locked=True)``, instead of coming back short and waiting for a
    poll. Not while caps are in effect: then the lane's claims run one at a time anyway."""
    queryset = (
        WorkItem.objects.filter(
            status=Status.PENDING, lane=_LANE, available_at__lte=Now(), kind__any_of=_KINDS
        )
        .exclude(id__any_of=_TAKEN)
        .filter(_key_free())
        .order_by("-priority", "available_at")
        .select_for_update(skip_locked=True)
        .values("id")[:_LIMIT]
    )
    return locking(
        queryset,
        {_LANE: "lane"},
        "limit",
        {
            _TAKEN: "(SELECT COALESCE(array_agg(id), '{}') FROM fair)::uuid[]",
            _KINDS: _ALLOWED_KINDS,
        },
        limit_sql=(
            "(CASE WHEN %(capped)s::boolean THEN 0"
            " ELSE %(limit)s::integer - (SELECT count(*) FROM fair) END)"
        ),
    )


def _claim_parts() -> dict[str, str]:
    """What each claimed row's context needs, as the site's tenancy looks it up (one join, or
    none), so the claim stays one round trip."""
    return {"claim_contexts": claim_contexts_sql()}


CLAIM_CONTROLS = Statement("claim_controls", ClaimControlsParams, SQL_DIR)
CLAIM = Statement(
    "claim",
    ClaimParams,
    SQL_DIR,
    includes=(CLAIM_CONTROLS,),
    build_locking=lambda: {"locking": _claim_locking(), "fallback": _fallback_locking()},
    build_parts=_claim_parts,
    generic_plan=True,
)
CLAIM_OLDEST_FIRST = Statement(
    "claim_oldest_first",
    ClaimOldestFirstParams,
    SQL_DIR,
    includes=(CLAIM_CONTROLS,),
    build_locking=lambda: {"locking": _oldest_first_locking()},
    build_parts=_claim_parts,
    generic_plan=True,
)
CAPS_IN_EFFECT = Statement("caps_in_effect", NoParams, SQL_DIR)
FAIL_ORPHANED = Statement("fail_orphaned", FailOrphanedParams, SQL_DIR)

# How long a process trusts its last reading of whether any tenant has a cap of its own: a cap
# set in the admin takes effect within this long.
CAPS_CACHE_S = 5.0
_caps = {"capped": False, "read_at": float("-inf")}


def forget_caps() -> None:
    """Read whether caps are in effect afresh at the next claim (after setting one)."""
    _caps["read_at"] = float("-inf")


def lane_mutex(lane: str) -> str:
    """The mutex that serializes a lane's claims while caps are in effect."""
    return f"workqueue.claim:{lane}"


def running_caps(lane: str, kinds: Sequence[str]) -> tuple[int | None, list[str], list[int]]:
    """The lane's cap (``WORKQUEUE["LANE_CAPS"]``) and the caps of the claimed kinds that
    declare one (``Kind.max_running``), as the claim statement takes them."""
    # A kind this process does not know declares no cap here (the claim never refused one).
    known = {k.name: k for k in all_kinds()}
    capped = [
        (name, known[name].max_running)
        for name in kinds
        if name in known and known[name].max_running is not None
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


def _count_orphan(item: WorkItem) -> None:
    ORPHANED.labels(item.kind).inc()
    log_event(logger, logging.WARNING, "work_orphaned", **fields_of_item(item))


def claim_plan(
    rctx: RequestContext,
    lane: str,
    kinds: Sequence[str] | None,
    worker_id: str,
    lease_s: float,
    limit: int,
    woken: bool = False,
) -> Plan:
    kinds = known_kinds() if kinds is None else list(kinds)
    if limit < 1 or not kinds:
        return []
    commit = "on" if wq_settings.CLAIM_DURABLE else "off"
    lane = check_lane(lane)
    lane_cap, capped_kinds, kind_caps = running_caps(lane, kinds)
    caps = (lane_cap, capped_kinds, kind_caps)
    # Lane and kind caps: the claim counts what the lane holds, one claimer at a time.
    run_capped = lane_cap is not None or bool(capped_kinds)
    # Tenant caps (WORKQUEUE["MAX_IN_FLIGHT"], a tenant's share): only the fair claim counts
    # them.
    default_cap = wq_settings.MAX_IN_FLIGHT
    tenant_capped = False
    if wq_settings.FAIR_CLAIM:
        tenant_capped = default_cap is not None
        if not tenant_capped:
            if time.monotonic() - _caps["read_at"] > CAPS_CACHE_S:
                found = yield System(CAPS_IN_EFFECT, NoParams())
                _caps.update(capped=bool(found.rows[0][0]), read_at=time.monotonic())
            tenant_capped = bool(_caps["capped"])
    # Woken from idle (its last claim found less than it asked): nothing was left to share out
    # when the claimer went idle, so the round-robin has nothing to choose between; the first
    # item is claimed alone, in the card's order across tenants, without the fair claim's walk
    # over the tenants (0.6 ms of a wake here: README, "Benchmarks"). Not while a tenant's
    # cap is in effect. The claim after it is fair again.
    first_alone = woken and not tenant_capped
    common = (lane, kinds, worker_id, float(lease_s), 1 if first_alone else int(limit), commit)
    if first_alone or not wq_settings.FAIR_CLAIM:
        rows: Rows = yield System(
            CLAIM_OLDEST_FIRST,
            ClaimOldestFirstParams(*common, run_capped, *caps),
            serialize=lane_mutex(lane) if run_capped else None,
        )
    else:
        # A cap holds across claimers only if they count in turn: while any cap is in effect
        # the lane's claims take its mutex, so each counts what the one before it claimed.
        capped = tenant_capped or run_capped
        rows = yield System(
            CLAIM,
            ClaimParams(*common, capped, default_cap, *caps),
            serialize=lane_mutex(lane) if capped else None,
        )
    if not rows.rows:
        return []
    claimed, orphans = hand_out(rctx, rows)
    for item in orphans:
        # Another claimer may have failed it first: either way it does not run.
        yield System(FAIL_ORPHANED, FailOrphanedParams(item.id, item.claim_token, ORPHAN_ERROR))
        _count_orphan(item)
    return claimed


def claim(
    rctx: RequestContext,
    lane: str,
    kinds: Sequence[str] | None,
    worker_id: str,
    lease_s: float,
    limit: int = 1,
    *,
    woken: bool = False,
) -> list[tuple[OpContext, WorkItem]]:
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
    item whose tenant is gone is failed by ``fail_orphaned``, never returned.

    Controls, all held by the statement itself: a paused lane or kind (``pause``) is not
    claimed; a lane's cap (``WORKQUEUE["LANE_CAPS"]``) and a kind's (``Kind.max_running``)
    bound what the lane holds at once (the lane's claims then run one at a time, as with tenant
    caps); of the items sharing a ``concurrency_key`` in a tenant, only the first waiting one
    is claimed, and only while none is claimed. In the rare race the unique index on claimed
    keys settles (two claimers each saw a different first item), the claim that lost takes
    nothing this time: ``[]``, as if the lane were empty, and the next claim tries again.

    ``woken``: the claimer was idle (its last claim found less than it asked) and was woken by a
    notice: with no backlog to share out, the first due item is claimed alone, highest priority
    then oldest across tenants, by the lighter statement (unless a tenant's cap is in effect).

    Takes no tenant: a worker serves every tenant's queue, so the claim reads across tenants on
    the system login, and each item comes back with the tenant it belongs to.
    """
    try:
        return run(claim_plan(rctx, lane, kinds, worker_id, lease_s, limit, woken))
    except (IntegrityError, psycopg.errors.UniqueViolation) as exc:
        if not _key_collision(exc):
            raise
        logger.info("claim_key_collision lane=%s worker=%s", lane, worker_id)
        return []


async def aclaim(
    rctx: RequestContext,
    lane: str,
    kinds: Sequence[str] | None,
    worker_id: str,
    lease_s: float,
    limit: int = 1,
    *,
    woken: bool = False,
) -> list[tuple[OpContext, WorkItem]]:
    """Async version of ``claim``."""
    try:
        return await arun(claim_plan(rctx, lane, kinds, worker_id, lease_s, limit, woken))
    except (IntegrityError, psycopg.errors.UniqueViolation) as exc:
        if not _key_collision(exc):
            raise
        logger.info("claim_key_collision lane=%s worker=%s", lane, worker_id)
        return []


def fail_orphaned_plan(item_id: uuid.UUID, claim_token: uuid.UUID, error: str) -> Plan:
    params = FailOrphanedParams(item_id, claim_token, storable_text(error))
    rows: Rows = yield System(FAIL_ORPHANED, params)
    if not rows.rows:
        raise Conflict(f"work item {item_id} is no longer held under this claim token")
    return items_of(rows, system_alias())[0]


def fail_orphaned(item_id: uuid.UUID, claim_token: uuid.UUID, error: str) -> WorkItem:
    """Fail for good an item whose tenant is gone, if ``claim_token`` still holds it.

    Takes no tenant: the tenant is gone, so no tenant context can be built for it; the claim
    token is the fence. No audit entry, since no tenant is left to hold one.
    """
    return run(fail_orphaned_plan(item_id, claim_token, error))
