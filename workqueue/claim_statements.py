"""The claim's statements: their parameters, and the locking querysets compiled into them.

The card's ``select_for_update(skip_locked=True)`` picks the rows; each queryset is compiled
once into its statement (``wqcore.statements.locking``), an ``UPDATE ... FROM (that subquery)
... RETURNING`` around it, so a claim batch is one round trip. The transition that runs them is
``workqueue.claim``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, NamedTuple, cast

from django.db.models import BooleanField, Exists, Field, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now

from tenancy.modes import claim_contexts_sql
from workqueue import SQL_DIR
from workqueue.dependents import RELEASE_ENDED
from workqueue.lookups import AnyOf
from workqueue.models import Pause, Ready, Status, WorkItem
from wqcore.statements import Locking, NoParams, Statement, locking

for _model, _names in ((WorkItem, ("id", "kind", "status")), (Ready, ("id", "kind"))):
    for _name in _names:
        # A cast the models keep true: these are columns of their own, not relations.
        cast("Field[Any, Any]", _model._meta.get_field(_name)).register_lookup(AnyOf)


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


class ClaimOneParams(NamedTuple):
    """The woken claim's (``sql/claim_one.sql``): one item, unless a rate limit or (``fair``)
    a tenant's cap holds."""

    lane: str
    kinds: list[str]
    worker_id: str
    lease_s: float
    synchronous_commit: str
    # Whether a tenant's cap holds it back (the fair claim counts them; fairness off does not).
    fair: bool


class ClaimSetParams(NamedTuple):
    """The parameters of what a claim writes on each item (``sql/claim_set.sql``, included by
    every claim)."""

    worker_id: str
    lease_s: float


class ClaimControlsParams(NamedTuple):
    """The parameters the claim's controls read (``sql/claim_controls.sql``, included by both
    claims)."""

    lane: str
    kinds: list[str]
    limit: int
    lane_cap: int | None
    capped_kinds: list[str]
    kind_caps: list[int]


class ClaimRateParams(NamedTuple):
    """The parameters the rate limits' part reads (``sql/claim_rate_granted.sql``, included by
    both claims while a limit is set): what the claim asked for, to say when to ask again."""

    lane: str
    kinds: list[str]
    limit: int


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


def _ring() -> Any:
    """The ready rows the claim reads: the ring's slots (1 to 4), never slot 0, whose items
    are due beyond the ring's reach until the rotation promotes them (a constant, so the plan
    leaves that partition out); and only those whose item is still pending (one probe of its
    key: a row left behind by a cancel of a pending item, a race, or a release before the ring
    is passed over, never picked, until the rotation drops it)."""
    pending = WorkItem.objects.filter(id=OuterRef("id"), status=Status.PENDING)
    return Ready.objects.filter(Exists(pending), slot__gt=0)


# What the claims across tenants (fairness off, the woken claim, the fair claim's fallback) say
# so they may read the ring's index across tenants (workqueue_ready_claim_idx, partial on it):
# true of every row, and never said by a tenant's pick, which must read the fair index.
_ACROSS_TENANTS = Q(priority__gte=-32768)


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
        _ring()
        .filter(available_at__lte=Now(), **key)
        .order_by("-priority", "available_at", "id")
        .values("id")[:1]
    )
    # The held check first: one probe of the unique index, and when the key is held the
    # first-item subquery is not run at all.
    return Q(concurrency_key__isnull=True) | (~Exists(held) & Q(id=Subquery(first)))


# An item no blocked bucket of a rate limit counts (claim_rate_blocked.sql: rate_blocked, a
# part of the claim with rate limits): one hashed probe per scope, per candidate, while any
# bucket is blocked.
_RATE_ALLOWED = RawSQL(
    # While no bucket is blocked (no limit binds), a one-time test: no candidate is probed.
    "(NOT EXISTS (SELECT FROM rate_blocked) OR NOT ("
    + " OR ".join(
        f"{column} IN (SELECT key FROM rate_blocked WHERE scope = '{scope}')"
        for scope, column in (
            ("kind", '"workqueue_ready"."kind"'),
            ("lane", '"workqueue_ready"."lane"'),
            ("tenant", '"workqueue_ready"."org_id"::text'),
        )
    )
    + ' OR ("workqueue_ready"."rate_key" IS NOT NULL AND "workqueue_ready"."rate_key"'
    " IN (SELECT key FROM rate_blocked WHERE scope = 'key'))))",
    (),
    output_field=BooleanField(),
)


# What a claim carries of each item it picked, beside its place: what the rate limits' part
# (claim_rate_granted.sql) finds the item's limits by, read as the row was locked rather than
# again by key; and where its ready row is (its slot, and what the ring's index orders it by),
# so the claim deletes that row by its key.
_PICKED = ("id", "kind", "org_id", "rate_key", "slot", "priority", "available_at")


def _allowed(limited: bool) -> Q:
    """When ``limited``, an item no rate limit blocks now; else any item."""
    return Q(_RATE_ALLOWED) if limited else Q()


def _claim_locking(limited: bool) -> Locking:
    """The card's claim, run once per tenant with work: its pending, due items of the lane
    and kinds, highest priority then oldest first, locked with
    ``select_for_update(skip_locked=True)``, so claimers never wait on each other and a row
    another claimer holds is passed over for the next one. Compiled once into the claim
    statement (an UPDATE around it, one round trip per batch) rather than evaluated, which
    would cost a round trip for the ids and another for the update."""
    queryset = (
        _ring()
        .filter(lane=_LANE, org_id=_ORG, available_at__lte=Now(), kind__any_of=_KINDS)
        .filter(_key_free(), _allowed(limited))
        .order_by("-priority", "available_at")
        .select_for_update(skip_locked=True)
        .values(*_PICKED)[:_LIMIT]
    )
    # The tenant and its share of the batch come from the statement's own offers (o).
    return locking(
        queryset,
        {_LANE: "lane"},
        "limit",
        {_ORG: "o.org_id", _KINDS: _ALLOWED_KINDS},
        "o.items",
    )


def _oldest_first_locking(limited: bool) -> Locking:
    """The claim with fairness off: pending, due items of the lane and kinds, highest priority
    then oldest first across tenants, ``select_for_update(skip_locked=True)``."""
    queryset = (
        _ring()
        .filter(_ACROSS_TENANTS, lane=_LANE, available_at__lte=Now(), kind__any_of=_KINDS)
        .filter(_key_free(), _allowed(limited))
        .order_by("-priority", "available_at")
        .select_for_update(skip_locked=True)
        .values(*_PICKED)[:_LIMIT]
    )
    return locking(
        queryset,
        {_LANE: "lane"},
        "limit",
        {_KINDS: _ALLOWED_KINDS},
        limit_sql="LEAST(%(limit)s::integer, (SELECT room FROM allowed))",
    )


def _not_paused() -> Q:
    """No pause stands on the item's lane, nor on its kind in that lane."""
    return ~Q(
        Exists(Pause.objects.filter(Q(kind="") | Q(kind=OuterRef("kind")), lane=OuterRef("lane")))
    )


def _one_locking() -> Locking:
    """The woken claim's: the first pending, due item of the lane and kinds across tenants,
    highest priority then oldest, not paused and free of its concurrency key,
    ``select_for_update(skip_locked=True)``."""
    queryset = (
        _ring()
        .filter(_ACROSS_TENANTS, lane=_LANE, available_at__lte=Now(), kind__any_of=_KINDS)
        .filter(_key_free(), _not_paused())
        .order_by("-priority", "available_at")
        .select_for_update(skip_locked=True)
        .values("id", "org_id", "slot", "priority", "available_at")[:_LIMIT]
    )
    return locking(queryset, {_LANE: "lane"}, "", {_KINDS: "%(kinds)s::text[]"}, limit_sql="1")


def _fallback_locking(limited: bool) -> Locking:
    """When other claimers hold the fair order's offers (they computed the same ones), the
    claim fills the rest of its batch in priority then age order from what nobody holds,
    ``select_for_update(skip_locked=True)``, instead of coming back short and waiting for a
    poll. Not while caps are in effect: then the lane's claims run one at a time anyway."""
    queryset = (
        _ring()
        .filter(_ACROSS_TENANTS, lane=_LANE, available_at__lte=Now(), kind__any_of=_KINDS)
        .exclude(id__any_of=_TAKEN)
        .filter(_key_free(), _allowed(limited))
        .order_by("-priority", "available_at")
        .select_for_update(skip_locked=True)
        .values(*_PICKED)[:_LIMIT]
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


CLAIM_CONTROLS = Statement("claim_controls", ClaimControlsParams, SQL_DIR)
CLAIM_SET = Statement("claim_set", ClaimSetParams, SQL_DIR)
CLAIM_RATE_BLOCKED = Statement("claim_rate_blocked", NoParams, SQL_DIR)
CLAIM_RATE_GRANTED = Statement("claim_rate_granted", ClaimRateParams, SQL_DIR)
# The rate parts while no limit is set: granted is picked as it is, and rate_blocked is read
# by nothing (PostgreSQL runs no CTE that nothing reads), so the claim costs what it did.
_UNLIMITED = {
    "rate_blocked": "rate_blocked AS (SELECT NULL::text AS scope, NULL::text AS key WHERE false",
    "rate_granted": "granted AS (\n    SELECT ids FROM picked",
    "rate_next_join": "",
}
# With rate limits: each row carries rate_next's rate_wait_s, and a claim that took nothing
# returns one row, with it alone (its item's columns NULL).
_RATE_NEXT_JOIN = "\n RIGHT JOIN rate_next ON true"


def _claim_parts(limited: bool) -> Callable[[], dict[str, str]]:
    """What each claimed row's context needs, as the site's tenancy looks it up (one join, or
    none), so the claim stays one round trip; and the rate limits' parts, when ``limited``."""

    def parts() -> dict[str, str]:
        rate = (
            {
                "rate_blocked": CLAIM_RATE_BLOCKED.sql,
                "rate_granted": CLAIM_RATE_GRANTED.sql,
                "rate_next_join": _RATE_NEXT_JOIN,
            }
            if limited
            else _UNLIMITED
        )
        return {"claim_contexts": claim_contexts_sql(), **rate}

    return parts


def _claim(limited: bool) -> Statement:
    return Statement(
        "claim",
        ClaimParams,
        SQL_DIR,
        includes=(CLAIM_CONTROLS, CLAIM_SET),
        build_locking=lambda: {
            "locking": _claim_locking(limited),
            "fallback": _fallback_locking(limited),
        },
        build_parts=_claim_parts(limited),
        generic_plan=True,
    )


def _claim_oldest_first(limited: bool) -> Statement:
    return Statement(
        "claim_oldest_first",
        ClaimOldestFirstParams,
        SQL_DIR,
        includes=(CLAIM_CONTROLS, CLAIM_SET),
        build_locking=lambda: {"locking": _oldest_first_locking(limited)},
        build_parts=_claim_parts(limited),
        generic_plan=True,
    )


RATE_LIMITS_IN_EFFECT = Statement("rate_limits_in_effect", NoParams, SQL_DIR)
CAPS_IN_EFFECT = Statement("caps_in_effect", NoParams, SQL_DIR)
# The woken claim of one item, unless a cap or rate limit holds (``claim.claim``).
CLAIM_ONE = Statement(
    "claim_one",
    ClaimOneParams,
    SQL_DIR,
    includes=(CLAIM_SET, RATE_LIMITS_IN_EFFECT, CAPS_IN_EFFECT),
    build_locking=lambda: {"locking": _one_locking()},
    build_parts=lambda: {"claim_contexts": claim_contexts_sql()},
    generic_plan=True,
)
# Each claim twice: as it is, and with the rate limits' parts (run while any limit is set).
CLAIM, CLAIM_LIMITED = _claim(False), _claim(True)
CLAIM_OLDEST_FIRST, CLAIM_OLDEST_FIRST_LIMITED = (
    _claim_oldest_first(False),
    _claim_oldest_first(True),
)
FAIL_ORPHANED = Statement("fail_orphaned", FailOrphanedParams, SQL_DIR, includes=(RELEASE_ENDED,))
