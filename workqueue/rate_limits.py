"""Rate limits: at most N items per period claimed of a kind, a lane, a tenant, or a rate key
the item carries (``NewItem.rate_key``, e.g. the remote account it calls), across every worker
and host together.

A limit is a row of ``workqueue_ratelimit``; its state is one row per limit and key in
``workqueue_ratebucket`` with the key's theoretical arrival time (GCRA), written by the claim
statement itself (``sql/claim_rate_granted.sql``, which calls ``sql/schema/rate_grant_v2.sql``
when a limit may count a picked item): the claim hands out only what each limit
allows now, and leaves the rest pending with no attempt spent (waiting is not a failure). A
target of ``*`` gives each kind, lane, tenant or key a bucket of its own.

``burst`` defaults to N: after a quiet spell a whole period's worth may go at once, and the
long-run rate is N per period. No notice says when a bucket allows its next item: a claim held
back by a limit says when (``claim.Claimed.rate_wait_s``) and the worker claims again then
(``workers/rate_wake.py``). With a burst of 1 each item waits for the one before it, so the
worker's lateness at each slot (a millisecond or so) slows the pace a little; a burst of 2 or
more absorbs it.

Global, not a tenant's: limits are the site operator's, set on the system login (the everyday
login has no right on either table), as pauses are; each change is audited in the same
statement under ``SITE_ORG_ID``. A change takes effect at the next claim (the first limit set,
or the last cleared, within ``claim.RATE_LIMITS_CACHE_S`` in other processes), and announces
``*`` on ``work_available``: every worker claims again at once.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from audit.api import APPEND_ENTRIES
from workqueue import SQL_DIR
from workqueue.claim import forget_rate_limits
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import check_text
from workqueue.kinds import get_kind
from workqueue.lanes import declared_lanes
from workqueue.models import RateLimit
from workqueue.pauses import SITE_ORG_ID
from wqcore.statements import NoParams, Statement
from wqcore.store import Plan, Rows, System, transition

SCOPES = tuple(RateLimit.Scope.values)
# Every kind, lane, tenant or key: each a bucket of its own.
EVERY = "*"
PERIODS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
COUNT_MAX = 1_000_000
TARGET_MAX = 200  # RateLimit.target, RateBucket.key
_RATE = re.compile(r"\s*(\d{1,7})\s*/\s*([smhd])\s*")


class Rate(NamedTuple):
    """N items per ``period_s`` seconds."""

    n: int
    period_s: int


class LimitState(NamedTuple):
    id: int
    scope: str
    target: str
    # At most n items per period_s seconds.
    n: int
    period_s: int
    burst: int
    set_by: str
    updated_at: datetime
    # How much of its burst the busiest bucket has spent now, and how many buckets allow
    # nothing now (read_rate_limits only: 0 elsewhere).
    used: int = 0
    blocked: int = 0

    @property
    def rate(self) -> str:
        """``N/s`` (or ``/m``, ``/h``, ``/d``), as ``parse_rate`` takes it."""
        unit = next((u for u, s in PERIODS_S.items() if s == self.period_s), None)
        return f"{self.n}/{unit}" if unit else f"{self.n}/{self.period_s}s"


class SetRateLimitParams(NamedTuple):
    scope: str
    target: str
    n: int
    period_s: int
    burst: int
    actor: str
    site_org_id: uuid.UUID
    request_id: uuid.UUID | None


class PurgeBucketsParams(NamedTuple):
    batch: int


class ClearRateLimitParams(NamedTuple):
    scope: str
    target: str
    site_org_id: uuid.UUID
    actor: str
    request_id: uuid.UUID | None


SET_RATE_LIMIT = Statement(
    "set_rate_limit", SetRateLimitParams, SQL_DIR, includes=(APPEND_ENTRIES,)
)
CLEAR_RATE_LIMIT = Statement(
    "clear_rate_limit", ClearRateLimitParams, SQL_DIR, includes=(APPEND_ENTRIES,)
)
READ_RATE_LIMITS = Statement("read_rate_limits", NoParams, SQL_DIR)
PURGE_RATE_BUCKETS = Statement("purge_rate_buckets", PurgeBucketsParams, SQL_DIR)


def parse_rate(text: object) -> Rate:
    """``"10/s"``, ``"600/m"``, ``"5/h"``, ``"100/d"`` as a ``Rate``, or ``InvalidPayload``
    naming the field."""
    match = _RATE.fullmatch(text) if isinstance(text, str) else None
    count = int(match.group(1)) if match else 0
    if match is None or not 1 <= count <= COUNT_MAX:
        raise InvalidPayload(
            f"rate: give N/s, N/m, N/h or N/d with N from 1 to {COUNT_MAX} "
            f"(e.g. '10/s'), got {text!r}"
        )
    return Rate(count, PERIODS_S[match.group(2)])


def check_burst(burst: object, rate: Rate) -> int:
    """The burst (None: the rate's N), or ``InvalidPayload`` naming the field."""
    if burst is None:
        return rate.n
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= COUNT_MAX:
        raise InvalidPayload(f"burst: give a whole number from 1 to {COUNT_MAX}, got {burst!r}")
    return burst


def check_target(scope: object, target: object) -> tuple[str, str]:
    """The scope and target as stored, or ``InvalidPayload`` naming the field: an unknown kind,
    an undeclared lane or a tenant id that is not a UUID is refused (a typo would limit
    nothing and say it did)."""
    if scope not in SCOPES:
        raise InvalidPayload(f"scope: give one of {', '.join(SCOPES)}, got {scope!r}")
    target = check_text("target", target, TARGET_MAX)
    if target == EVERY:
        return str(scope), target
    if scope == RateLimit.Scope.KIND:
        return str(scope), get_kind(target).name
    if scope == RateLimit.Scope.LANE and target not in declared_lanes():
        raise InvalidPayload(
            f"target: lane {target!r} is not declared (declared: {', '.join(declared_lanes())})"
        )
    if scope == RateLimit.Scope.TENANT:
        try:
            return str(scope), str(uuid.UUID(target))
        except ValueError:
            raise InvalidPayload(f"target: a tenant's id (a UUID) or '*', got {target!r}") from None
    return str(scope), target


def _limit(row: Sequence[Any]) -> LimitState:
    return LimitState(*row)


@transition
def set_rate_limit(
    actor: str,
    scope: str,
    target: str,
    rate: str = "10/s",
    burst: int | None = None,
    *,
    request_id: uuid.UUID | None = None,
) -> Plan[LimitState]:
    """Set (or change) the rate limit of ``scope`` (kind, lane, tenant, key) and ``target``
    (its name, id or key; ``*``: each its own bucket): at most ``rate`` (``"10/s"``) items
    claimed, ``burst`` at once (default: the rate's N). A changed limit starts its buckets
    afresh (full). ``actor`` signs the audit entry (``queue.rate_limit_set``).

    Takes no tenant: a limit is the site operator's, written on the system login. The callers
    (the admin, ``manage.py queue limit``) check that the user is the operator."""
    scope, target = check_target(scope, target)
    parsed = parse_rate(rate)
    params = SetRateLimitParams(
        scope, target, *parsed, check_burst(burst, parsed), actor, SITE_ORG_ID, request_id
    )
    rows: Rows = yield System(SET_RATE_LIMIT, params)
    forget_rate_limits()
    return _limit(rows.rows[0])


@transition
def clear_rate_limit(
    actor: str, scope: str, target: str, *, request_id: uuid.UUID | None = None
) -> Plan[LimitState | None]:
    """Remove the rate limit of ``scope`` and ``target``: returns it, or None when none was set
    (nothing changes, nothing is audited). ``actor`` signs the audit entry
    (``queue.rate_limit_cleared``). Takes no tenant, as ``set_rate_limit``."""
    if scope not in SCOPES:
        raise InvalidPayload(f"scope: give one of {', '.join(SCOPES)}, got {scope!r}")
    target = check_text("target", target, TARGET_MAX)
    params = ClearRateLimitParams(scope, target, SITE_ORG_ID, actor, request_id)
    rows: Rows = yield System(CLEAR_RATE_LIMIT, params)
    forget_rate_limits()
    return _limit(rows.rows[0]) if rows.rows else None


@transition
def read_rate_limits() -> Plan[list[LimitState]]:
    """Every rate limit, by scope then target, with what its busiest bucket has spent of its
    burst now and how many of its buckets allow nothing now. Takes no tenant: limits are the
    site's."""
    rows: Rows = yield System(READ_RATE_LIMITS, NoParams())
    return [_limit(row) for row in rows.rows]


@transition
def purge_rate_buckets(batch: int = 1000, max_batches: int = 100) -> Plan[int]:
    """Delete the buckets idle for a whole burst (full again: the claim makes a missing bucket
    full, so nothing it allows changes) and those of a limit no longer set, in batches of
    ``batch`` (at most ``max_batches`` per call); returns how many. Keeps the table as large as
    the keys active lately, not every key ever limited. Takes no tenant: the limits are the
    site's."""
    total = 0
    for _ in range(max_batches):
        rows: Rows = yield System(PURGE_RATE_BUCKETS, PurgeBucketsParams(int(batch)))
        deleted = int(rows.rows[0][0])
        total += deleted
        if deleted < batch:
            break  # a short batch: nothing more is idle
    return total
