"""Which dead letters a filter means: the filter, and the readings of it (grouped, counted,
the lanes that hold items), across tenants or under one tenant's row-level security."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from workqueue import SQL_DIR
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import is_aware
from wqcore.conf import wq_settings
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Step, System, Tenant, transition

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
        """This filter, or ``InvalidPayload`` naming the field that cannot be one. Each field is
        checked as a value of any type: a dataclass does not check its annotations."""
        texts: tuple[tuple[str, object, int], ...] = (
            ("kind", self.kind, 100),
            ("lane", self.lane, 50),
            ("error_contains", self.error_contains, ERROR_CONTAINS_MAX),
        )
        for name, value, longest in texts:
            if value is None:
                continue
            if not isinstance(value, str) or not value or "\x00" in value:
                raise InvalidPayload(f"{name}: must be non-empty text")
            if len(value) > longest:
                raise InvalidPayload(f"{name}: at most {longest} characters")
        if self.failed_since is not None and not is_aware(self.failed_since):
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


def match_values(dead: DeadFilter, until: datetime | None) -> dict[str, Any]:
    """The values of ``dead_matching``'s parameters."""
    return {
        "until": until,
        "since": dead.failed_since,
        "error_like": _like(dead.error_contains),
        "window_s": wq_settings.TRIAGE_SEARCH_WINDOW_S,
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


class ReadLanesParams(NamedTuple):
    # Whether the lanes of pending and claimed items count (the items list), or only the
    # dead letters' (the dead-letter list).
    with_live: bool
    scan: int


DEAD_MATCHING = Statement("dead_matching", DeadMatchingParams, SQL_DIR)
GROUP_DEAD = Statement("group_dead", GroupDeadParams, SQL_DIR, includes=(DEAD_MATCHING,))
COUNT_DEAD = Statement("count_dead", CountDeadParams, SQL_DIR, includes=(DEAD_MATCHING,))
READ_LANES = Statement("read_lanes", ReadLanesParams, SQL_DIR)


def _step(org_id: uuid.UUID | None, statement: Statement, params: NamedTuple) -> Step:
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


@transition
def group_dead(dead: DeadFilter, scope: uuid.UUID | None = None) -> Plan[Grouped]:
    """The dead letters ``dead`` matches, grouped by kind and their error's first line (the
    newest ``SCAN_MAX`` read): for every tenant (``scope`` None, the operator's reading on the
    system login) or one tenant's, under its row-level security."""
    dead = dead.checked()
    params = GroupDeadParams(**match_values(dead, None), scan=SCAN_MAX, groups=GROUPS_MAX)
    rows: Rows = yield _step(scope, GROUP_DEAD, params)
    groups = [Group(k, e, int(n), first, last) for k, e, n, first, last, _ in rows.rows]
    scanned = int(rows.rows[0][5]) if rows.rows else 0
    return Grouped(groups, scanned, scanned >= SCAN_MAX)


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


@transition
def count_dead(
    dead: DeadFilter, scope: uuid.UUID | None = None, until: datetime | None = None
) -> Plan[Counted]:
    """How many dead letters ``dead`` matches (at most ``SCAN_MAX`` counted), per tenant, and
    the database's now(); ``until``: only those failed no later than then. Across tenants
    (``scope`` None, system login) or in one tenant, under its row-level security."""
    dead = dead.checked()
    params = CountDeadParams(**match_values(dead, until), scan=SCAN_MAX)
    rows: Rows = yield _step(scope, COUNT_DEAD, params)
    read_at, text = rows.rows[0]
    by_tenant = {uuid.UUID(org): int(n) for org, n in json.loads(text)}
    return Counted(read_at, by_tenant, sum(by_tenant.values()) >= SCAN_MAX)


@transition
def read_lanes(scope: uuid.UUID | None = None, with_live: bool = True) -> Plan[list[str]]:
    """The lanes that hold items (pending, claimed, and the newest ``SCAN_MAX`` dead letters;
    only the dead letters' without ``with_live``), at most 200, read without a scan of the
    table: the admin's lane filter lists every lane it can find work in, declared or not.
    Across tenants (``scope`` None, system login) or one tenant's, under its row-level
    security."""
    rows: Rows = yield _step(scope, READ_LANES, ReadLanesParams(with_live, SCAN_MAX))
    return [lane for (lane,) in rows.rows]
