"""Triage: what an operator does with dead letters: requeue them (now or after a delay),
discard them, or edit a payload and requeue it.

Each is one statement under the items' tenant (row-level security applies), fenced on what the
operator saw: the item's status and ``updated_at`` as the confirmation page drew them
(``Drawn``). An item that changed since (claimed, completed, requeued or discarded by someone
else) matches nothing and is left as it is; the result names it. Each statement appends an audit
entry per item naming the operator and keeping what the item had (error, attempts, payload), and
the requeues announce their lanes on ``work_available``. Bounded: at most ``MAX_BATCH`` items
per call.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from audit.services import APPEND_ENTRIES
from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.enqueue import READ_ITEMS, ReadItemsParams
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.inputs import check_id
from workqueue.kinds import get_kind, validate_payload
from workqueue.models import Status, WorkItem
from workqueue.rows import items_of
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, Tenant, arun, run

logger = logging.getLogger(__name__)

# The most items one triage call changes: a confirmation page lists each one.
MAX_BATCH = 100
# The longest delay a requeue takes (30 days).
MAX_DELAY_S = 30 * 86400
# What each action may act on: a claimed item is its holder's (the claim token fences it).
REQUEUEABLE = frozenset({Status.FAILED.value})
DISCARDABLE = frozenset({Status.FAILED.value, Status.PENDING.value})


class Drawn(NamedTuple):
    """An item as the operator saw it: the fence a triage action presents."""

    id: uuid.UUID
    status: str
    updated_at: datetime

    @classmethod
    def of(cls, item: WorkItem) -> Drawn:
        return cls(item.id, item.status, item.updated_at)

    def token(self) -> str:
        """The fence as one string, for a hidden form field (``parse`` reads it back)."""
        return f"{self.id}|{self.status}|{self.updated_at.isoformat()}"

    @classmethod
    def parse(cls, text: Any) -> Drawn:
        """A fence from ``token``'s string, or ``InvalidPayload`` naming the field."""
        parts = text.split("|") if isinstance(text, str) and len(text) <= 200 else []
        if len(parts) != 3:
            raise InvalidPayload("fence: must be id|status|updated_at, as the page drew it")
        item_id = check_id(parts[0], "fence.id")
        if parts[1] not in Status.values:
            raise InvalidPayload("fence.status: not a status")
        try:
            when = parse_datetime(parts[2])
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise InvalidPayload("fence.updated_at: must be a timestamp with a time zone")
        return cls(item_id, parts[1], when)


@dataclass(frozen=True)
class Triaged:
    # The items the action changed, as they are now.
    changed: list[WorkItem]
    # The items left as they were: changed since the page was drawn (or not in the tenant).
    refused: list[uuid.UUID]


class TriageParams(NamedTuple):
    ids: list[uuid.UUID]
    statuses: list[str]
    updated_ats: list[datetime]
    # Who the audit entries name: the operator, and their request.
    actor: str
    request_id: uuid.UUID


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


REQUEUE_DEAD = Statement("requeue_dead", RequeueDeadParams, SQL_DIR, includes=(APPEND_ENTRIES,))
DISCARD = Statement("discard", TriageParams, SQL_DIR, includes=(APPEND_ENTRIES,))
REQUEUE_EDITED = Statement(
    "requeue_edited", RequeueEditedParams, SQL_DIR, includes=(APPEND_ENTRIES,)
)


def _checked(drawn: Sequence[Drawn], allowed: frozenset[str], action: str) -> list[Drawn]:
    """The fences to present, or ``InvalidPayload``: 1 to ``MAX_BATCH`` distinct items, each
    drawn in a status the action may act on."""
    fences = list(dict.fromkeys(drawn))
    if not fences:
        raise InvalidPayload("items: select at least one item")
    if len(fences) > MAX_BATCH:
        raise InvalidPayload(f"items: at most {MAX_BATCH} at a time (got {len(fences)})")
    for fence in fences:
        if not isinstance(fence, Drawn):
            raise InvalidPayload(f"items: must be Drawn fences, got {type(fence).__name__}")
        if fence.status not in allowed:
            raise InvalidPayload(
                f"items: {action} acts on {' or '.join(sorted(allowed))} items; "
                f"{fence.id} is {fence.status}"
            )
    return fences


def check_delay(delay_s: Any) -> float:
    """A requeue's delay in seconds, or ``InvalidPayload`` saying what it may be."""
    if (
        isinstance(delay_s, bool)
        or not isinstance(delay_s, int | float)
        or not math.isfinite(delay_s)
        or not 0 <= delay_s <= MAX_DELAY_S
    ):
        raise InvalidPayload(f"delay: must be 0 to {MAX_DELAY_S} seconds (30 days)")
    return float(delay_s)


def _result(fences: list[Drawn], rows: Rows) -> Triaged:
    changed = items_of(rows)
    done = {item.id for item in changed}
    return Triaged(changed, [f.id for f in fences if f.id not in done])


def _log(event: str, ctx: OpContext, result: Triaged) -> None:
    log_event(
        logger,
        logging.INFO,
        event,
        tenant=str(ctx.org_id),
        actor=ctx.user_id,
        changed=len(result.changed),
        refused=len(result.refused),
    )


# -- requeue ------------------------------------------------------------------------------------


def requeue_dead_plan(ctx: OpContext, drawn: Sequence[Drawn], delay_s: float) -> Plan:
    fences = _checked(drawn, REQUEUEABLE, "requeue")
    params = RequeueDeadParams(
        [f.id for f in fences],
        [f.status for f in fences],
        [f.updated_at for f in fences],
        check_delay(delay_s),
        ctx.user_id,
        ctx.request_id,
    )
    result = _result(fences, (yield Tenant(ctx.org_id, REQUEUE_DEAD, params)))
    _log("work_requeued", ctx, result)
    return result


def requeue_dead(ctx: OpContext, drawn: Sequence[Drawn], delay_s: float = 0.0) -> Triaged:
    """Put the context's tenant's dead letters back to pending, due after ``delay_s``, with
    their attempts reset; each one's error and attempts stay in its ``work.requeued`` audit
    entry, which names ``ctx``'s user. Only items still failed with the ``updated_at`` they were
    drawn with change; the rest come back in ``refused``. Joins the caller's transaction."""
    return run(requeue_dead_plan(ctx, drawn, delay_s))


async def arequeue_dead(ctx: OpContext, drawn: Sequence[Drawn], delay_s: float = 0.0) -> Triaged:
    """Async version of ``requeue_dead``."""
    return await arun(requeue_dead_plan(ctx, drawn, delay_s))


# -- discard ------------------------------------------------------------------------------------


def discard_plan(ctx: OpContext, drawn: Sequence[Drawn]) -> Plan:
    fences = _checked(drawn, DISCARDABLE, "discard")
    params = TriageParams(
        [f.id for f in fences],
        [f.status for f in fences],
        [f.updated_at for f in fences],
        ctx.user_id,
        ctx.request_id,
    )
    result = _result(fences, (yield Tenant(ctx.org_id, DISCARD, params)))
    _log("work_discarded", ctx, result)
    return result


def discard(ctx: OpContext, drawn: Sequence[Drawn]) -> Triaged:
    """Set the context's tenant's dead letters (or pending items) aside as ``discarded``: never
    run, purged later. Each one's ``work.discarded`` audit entry keeps its payload, error and
    attempts and names ``ctx``'s user. Only items still as drawn change; the rest come back in
    ``refused``. Joins the caller's transaction."""
    return run(discard_plan(ctx, drawn))


async def adiscard(ctx: OpContext, drawn: Sequence[Drawn]) -> Triaged:
    """Async version of ``discard``."""
    return await arun(discard_plan(ctx, drawn))


# -- edit the payload, then requeue -------------------------------------------------------------


def requeue_edited_plan(ctx: OpContext, drawn: Drawn, payload: Any) -> Plan:
    (fence,) = _checked([drawn], REQUEUEABLE, "requeue")
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
    _log("work_requeued_edited", ctx, result)
    return result.changed[0]


def requeue_edited(ctx: OpContext, drawn: Drawn, payload: dict[str, Any]) -> WorkItem:
    """Replace a dead letter's payload (validated against its kind's schema: a bad one raises
    ``InvalidPayload`` naming the field and changes nothing) and put it back to pending now with
    its attempts reset. Its ``work.requeued_edited`` audit entry keeps the payload before and
    after, the error and the attempts, and names ``ctx``'s user. Raises ``Conflict`` when the
    item is no longer as drawn (nothing changes). Joins the caller's transaction."""
    return run(requeue_edited_plan(ctx, drawn, payload))


async def arequeue_edited(ctx: OpContext, drawn: Drawn, payload: dict[str, Any]) -> WorkItem:
    """Async version of ``requeue_edited``."""
    return await arun(requeue_edited_plan(ctx, drawn, payload))


# -- triage by filter: everything a dead-letter filter matches ------------------------------------

# The most dead letters a grouping or a count reads (the newest first): a bad deploy's million
# dead letters cost a bounded read, and the page says when it stopped.
SCAN_MAX = 100_000
# The most groups the grouped list shows.
GROUPS_MAX = 200
# The longest error text a filter searches for.
ERROR_CONTAINS_MAX = 200


@dataclass(frozen=True)
class DeadFilter:
    """Which dead letters a triage by filter (or the grouped list, or a count) means: failed
    items of the kind, lane and tenant when named, whose error contains ``error_contains``
    (case-insensitive), failed at or after ``failed_since``. An error search without
    ``failed_since`` looks only at the last ``WORKQUEUE["TRIAGE_SEARCH_WINDOW_S"]``: it reads
    dead letters by when they failed (``workitem_triage_idx``), never the whole table."""

    kind: str | None = None
    lane: str | None = None
    error_contains: str | None = None
    failed_since: datetime | None = None
    org_id: uuid.UUID | None = None

    def checked(self) -> DeadFilter:
        """This filter, or ``InvalidPayload`` naming the field that cannot be one."""
        for name, value, longest in (
            ("kind", self.kind, 100),
            ("lane", self.lane, 50),
            ("error_contains", self.error_contains, ERROR_CONTAINS_MAX),
        ):
            if value is None:
                continue
            if not isinstance(value, str) or not value or "\x00" in value:
                raise InvalidPayload(f"{name}: must be non-empty text")
            if len(value) > longest:
                raise InvalidPayload(f"{name}: at most {longest} characters")
        since = self.failed_since
        if since is not None and (not isinstance(since, datetime) or since.tzinfo is None):
            raise InvalidPayload("failed_since: must be a timestamp with a time zone")
        if self.org_id is not None and not isinstance(self.org_id, uuid.UUID):
            raise InvalidPayload("tenant: must be a tenant's id")
        return self

    def described(self) -> dict[str, Any]:
        """The filter as the audit entries and the pages show it (only what is set)."""
        values = {
            "kind": self.kind,
            "lane": self.lane,
            "error_contains": self.error_contains,
            "failed_since": self.failed_since.isoformat() if self.failed_since else None,
            "tenant": str(self.org_id) if self.org_id else None,
        }
        return {name: value for name, value in values.items() if value is not None}


_AGO = re.compile(r"^(\d{1,6})([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str, name: str = "failed_since") -> datetime:
    """A moment from a query string or a command line: ISO 8601 with a time zone, a date
    alone (midnight UTC), or a while ago (``90s``, ``30m``, ``6h``, ``2d``); else
    ``InvalidPayload`` naming ``name``."""
    text = (text or "").strip()
    ago = _AGO.match(text)
    if ago:
        return timezone.now() - timedelta(seconds=int(ago.group(1)) * _UNIT_S[ago.group(2)])
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            text = f"{text}T00:00:00+00:00"  # a date alone: its midnight, UTC
        when = parse_datetime(text)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise InvalidPayload(
            f"{name}: must be a timestamp with a time zone (2026-12-01T09:30:00+00:00), a date, "
            f"or a while ago (30m, 6h, 2d), got {text[:40]!r}"
        )
    return when


def _like(text: str | None) -> str | None:
    """``text`` as an ILIKE pattern that matches it anywhere, its wildcards taken literally."""
    if text is None:
        return None
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _match_values(dead: DeadFilter, until: datetime | None) -> dict[str, Any]:
    """The values of ``dead_matching``'s parameters."""
    from wqcore.conf import wq_settings

    return {
        "until": until,
        "since": dead.failed_since,
        "error_like": _like(dead.error_contains),
        "window_s": float(wq_settings.TRIAGE_SEARCH_WINDOW_S),
        "kind": dead.kind,
        "lane": dead.lane,
        "org_id": dead.org_id,
    }


class DeadMatchingParams(NamedTuple):
    until: datetime | None
    since: datetime | None
    error_like: str | None
    window_s: float
    kind: str | None
    lane: str | None
    org_id: uuid.UUID | None


class GroupDeadParams(NamedTuple):
    until: datetime | None
    since: datetime | None
    error_like: str | None
    window_s: float
    kind: str | None
    lane: str | None
    org_id: uuid.UUID | None
    scan: int
    groups: int


class CountDeadParams(NamedTuple):
    until: datetime | None
    since: datetime | None
    error_like: str | None
    window_s: float
    kind: str | None
    lane: str | None
    org_id: uuid.UUID | None
    scan: int


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


class ReadLanesParams(NamedTuple):
    # Whether the lanes of pending and claimed items count (the items list), or only the
    # dead letters' (the dead-letter list).
    with_live: bool
    scan: int


DEAD_MATCHING = Statement("dead_matching", DeadMatchingParams, SQL_DIR)
GROUP_DEAD = Statement("group_dead", GroupDeadParams, SQL_DIR, includes=(DEAD_MATCHING,))
COUNT_DEAD = Statement("count_dead", CountDeadParams, SQL_DIR, includes=(DEAD_MATCHING,))
REQUEUE_MATCHING = Statement(
    "requeue_matching",
    MatchingActionParams,
    SQL_DIR,
    includes=(DEAD_MATCHING, APPEND_ENTRIES),
)
DISCARD_MATCHING = Statement(
    "discard_matching",
    MatchingActionParams,
    SQL_DIR,
    includes=(DEAD_MATCHING, APPEND_ENTRIES),
)
READ_LANES = Statement("read_lanes", ReadLanesParams, SQL_DIR)


def _step(org_id: uuid.UUID | None, statement: Statement, params: NamedTuple) -> Any:
    """A reading across tenants (``None``: the operator, system login) or of one tenant
    (under its row-level security): the same statement either way."""
    return System(statement, params) if org_id is None else Tenant(org_id, statement, params)


@dataclass(frozen=True)
class Group:
    """Dead letters of one kind whose errors share their first line."""

    kind: str
    error: str
    items: int
    first_failed: datetime
    last_failed: datetime


@dataclass(frozen=True)
class Grouped:
    groups: list[Group]
    # How many dead letters were read; ``capped``: the newest SCAN_MAX only (there may be more).
    scanned: int
    capped: bool


def group_dead_plan(dead: DeadFilter, scope: uuid.UUID | None) -> Plan:
    dead = dead.checked()
    params = GroupDeadParams(**_match_values(dead, None), scan=SCAN_MAX, groups=GROUPS_MAX)
    rows: Rows = yield _step(scope, GROUP_DEAD, params)
    groups = [Group(k, e, int(n), first, last) for k, e, n, first, last, _ in rows.rows]
    scanned = int(rows.rows[0][5]) if rows.rows else 0
    return Grouped(groups, scanned, scanned >= SCAN_MAX)


def group_dead(dead: DeadFilter, scope: uuid.UUID | None = None) -> Grouped:
    """The dead letters ``dead`` matches, grouped by kind and their error's first line (the
    newest ``SCAN_MAX`` read): for every tenant (``scope`` None, the operator's reading on the
    system login) or one tenant's, under its row-level security."""
    return run(group_dead_plan(dead, scope))


@dataclass(frozen=True)
class Counted:
    """How many dead letters a filter matches, per tenant, as of ``read_at`` (the database's
    clock): the moment a triage by filter is fenced on."""

    read_at: datetime
    by_tenant: dict[uuid.UUID, int]
    capped: bool

    @property
    def items(self) -> int:
        return sum(self.by_tenant.values())


def count_dead_plan(dead: DeadFilter, scope: uuid.UUID | None, until: datetime | None) -> Plan:
    dead = dead.checked()
    params = CountDeadParams(**_match_values(dead, until), scan=SCAN_MAX)
    rows: Rows = yield _step(scope, COUNT_DEAD, params)
    read_at, text = rows.rows[0]
    by_tenant = {uuid.UUID(org): int(n) for org, n in json.loads(text)}
    return Counted(read_at, by_tenant, sum(by_tenant.values()) >= SCAN_MAX)


def count_dead(
    dead: DeadFilter, scope: uuid.UUID | None = None, until: datetime | None = None
) -> Counted:
    """How many dead letters ``dead`` matches (at most ``SCAN_MAX`` counted), per tenant, and
    the database's now(); ``until``: only those failed no later than then. Across tenants
    (``scope`` None, system login) or in one tenant, under its row-level security."""
    return run(count_dead_plan(dead, scope, until))


@dataclass(frozen=True)
class Progress:
    """What a triage by filter did in one tenant: items changed, items read but left alone
    (changed since the moment confirmed), and whether it got through (``done``) or stopped at
    its batch budget, to be resumed."""

    changed: int
    left_alone: int
    done: bool


MATCHING_ACTIONS = {"requeue": REQUEUE_MATCHING, "discard": DISCARD_MATCHING}


def act_on_matching_plan(
    action: str,
    ctx: OpContext,
    dead: DeadFilter,
    until: datetime,
    batch: int,
    max_batches: int,
) -> Plan:
    statement = MATCHING_ACTIONS.get(action)
    if statement is None:
        raise InvalidPayload(f"action: must be one of {', '.join(MATCHING_ACTIONS)}")
    if not isinstance(until, datetime) or until.tzinfo is None:
        raise InvalidPayload("until: must be a timestamp with a time zone")
    dead = dead.checked()
    described = json.dumps({**dead.described(), "until": until.isoformat()})
    before, changed, left = until, 0, 0
    for _ in range(max_batches):
        params = MatchingActionParams(
            **_match_values(dead, until),
            before=before,
            batch=batch,
            filter=described,
            actor=ctx.user_id,
            request_id=ctx.request_id,
        )
        rows: Rows = yield Tenant(ctx.org_id, statement, params)
        read, oldest, moved = rows.rows[0][:3]
        changed, left = changed + int(moved), left + int(read) - int(moved)
        # A batch smaller than asked for was the last: nothing older matches.
        if int(read) < batch:
            result = Progress(changed, left, True)
            break
        # The next batch starts at the oldest this one read (inclusive: items failed at the
        # same instant; those this one changed no longer match).
        before = oldest
    else:
        result = Progress(changed, left, False)
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


def act_on_matching(
    action: str,
    ctx: OpContext,
    dead: DeadFilter,
    until: datetime,
    batch: int | None = None,
    max_batches: int | None = None,
) -> Progress:
    """Requeue (``action`` "requeue": pending now, attempts reset) or discard ("discard") the
    context's tenant's dead letters that ``dead`` matches, in batches of ``batch``
    (``WORKQUEUE["TRIAGE_BATCH"]``), at most ``max_batches`` of them
    (``TRIAGE_MAX_BATCHES``), each one statement. Fenced on ``until``, the moment the operator
    confirmed: only items still failed and unchanged since then change, so an item requeued,
    retried or failed again meanwhile is left alone, and running it again with the same
    ``until`` resumes where it stopped. Each item changed gets its audit entry naming ``ctx``'s
    user, with the filter. Joins the caller's transaction (else each batch commits alone)."""
    from wqcore.conf import wq_settings

    return run(
        act_on_matching_plan(
            action,
            ctx,
            dead,
            until,
            int(batch or wq_settings.TRIAGE_BATCH),
            int(max_batches or wq_settings.TRIAGE_MAX_BATCHES),
        )
    )


async def aact_on_matching(
    action: str,
    ctx: OpContext,
    dead: DeadFilter,
    until: datetime,
    batch: int | None = None,
    max_batches: int | None = None,
) -> Progress:
    """Async version of ``act_on_matching``."""
    from wqcore.conf import wq_settings

    return await arun(
        act_on_matching_plan(
            action,
            ctx,
            dead,
            until,
            int(batch or wq_settings.TRIAGE_BATCH),
            int(max_batches or wq_settings.TRIAGE_MAX_BATCHES),
        )
    )


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
) -> Swept:
    """``act_on_matching`` in each tenant holding dead letters ``dead`` matches (found across
    tenants on the system login for the operator, ``scope`` None; else only ``scope``'s, under
    its row-level security), each under the context ``context_of(tenant)`` gives (whom its
    audit entries name). ``max_batches`` is the budget of the whole call."""
    from wqcore.conf import wq_settings

    budget = int(max_batches or wq_settings.TRIAGE_MAX_BATCHES)
    counted = count_dead(dead, scope, until)
    swept = Swept(done=not counted.capped)
    batch = int(wq_settings.TRIAGE_BATCH)
    for org_id, items in sorted(counted.by_tenant.items(), key=lambda t: -t[1]):
        if budget <= 0:
            swept.done = False
            break
        wanted = min(budget, -(-items // batch) + 1)
        progress = act_on_matching(action, context_of(org_id), dead, until, batch, wanted)
        budget -= wanted
        swept.changed += progress.changed
        swept.left_alone += progress.left_alone
        swept.tenants += 1
        swept.done = swept.done and progress.done
    return swept


def read_lanes(scope: uuid.UUID | None = None, with_live: bool = True) -> list[str]:
    """The lanes that hold items (pending, claimed, and the newest ``SCAN_MAX`` dead letters;
    only the dead letters' without ``with_live``), at most 200, read without a scan of the
    table: the admin's lane filter lists every lane it can find work in, declared or not.
    Across tenants (``scope`` None, system login) or one tenant's, under its row-level
    security."""
    return run(_lanes_plan(scope, with_live))


def _lanes_plan(scope: uuid.UUID | None, with_live: bool) -> Plan:
    rows: Rows = yield _step(scope, READ_LANES, ReadLanesParams(with_live, SCAN_MAX))
    return [lane for (lane,) in rows.rows]
