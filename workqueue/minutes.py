"""The queue's minutes: what the attempts came to, per tenant, lane and minute (the database's
clock), for the gauges page's charts.

The sweep rolls them up (``roll_up_minutes``): it reads the attempts table in id order from
where it stopped, so each attempt is counted once, by one statement per batch that adds to the
minutes' rows and moves its place on in the same transaction; the settle statements, and with
them the drain, are as they were. It counts the pending items of each tenant's lane once a
minute (``sample_pending``). The table is partitioned by day: the sweep makes the days ahead
and drops each whole once past ``ROLLUP_RETENTION_S`` (``keep_minutes``,
``sql/schema/minutes_parts_v1.sql``), so no row is deleted one by one. The gauges page reads
them (``read_minutes``): across tenants on the system login for the operator, or under one
tenant's row-level security for its staff, by the same statement.

Waits are kept as histograms over ``WAIT_BOUNDS_S``, which add up across tenants, lanes and
minutes; a percentile is read from the sum (``quantile``): the bound that many claims waited at
most.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from workqueue import SQL_DIR
from workqueue.figures import under_tenant
from workqueue.kinds import known_kinds
from workqueue.lanes import declared_lanes
from wqcore.conf import wq_settings
from wqcore.statements import NoParams, Statement
from wqcore.store import Plan, Rows, System, transition

# The waits' buckets, in seconds: a claim that waited w is counted in the first bucket whose
# bound is above w, or in the last (at or past the last bound). Fixed: rows written with other
# bounds would read wrong (a change starts the charts afresh: purge the minutes).
WAIT_BOUNDS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0,
    150.0, 300.0, 600.0, 1800.0, 3600.0, 10800.0, 86400.0,
)  # fmt: skip
# A transaction in progress when the rollup took its mark, and still open this long after,
# is no longer waited for: an attempt it commits later is not counted (the settle statements
# are single statements; this bounds what a forgotten open transaction can hold the charts up).
MARK_GRACE_S = 300.0


class RollUpParams(NamedTuple):
    # The declared lanes: the attempts of any other lane are counted as one.
    lanes: list[str]
    bounds: list[float]
    # The registered kinds: the attempts of any other kind are counted as one (UNKNOWN_KIND).
    kinds: list[str]
    batch: int
    grace_s: float
    # Attempts that ended longer ago are passed over (their rows would be purged at once).
    retention_s: float


class SamplePendingParams(NamedTuple):
    lanes: list[str]
    bounds: list[float]
    kinds: list[str]


class KeepMinutesParams(NamedTuple):
    retention_s: float
    # Days are made this far ahead, so a minute never waits for its day to be made.
    ahead_s: float


class ReadMinutesParams(NamedTuple):
    bin_s: int
    bins: int


ROLL_UP_MINUTES = Statement("roll_up_minutes", RollUpParams, SQL_DIR)
START_ROLLUP = Statement("start_rollup", NoParams, SQL_DIR)
SAMPLE_PENDING = Statement("sample_pending", SamplePendingParams, SQL_DIR)
KEEP_MINUTES = Statement("keep_minutes", KeepMinutesParams, SQL_DIR)


def _wait_sums() -> dict[str, str]:
    """``ARRAY[sum(waits[1]), ...]``: each bucket of the histograms in ``waits`` summed."""
    sums = ", ".join(f"sum(waits[{k}])::bigint" for k in range(1, len(WAIT_BOUNDS_S) + 2))
    return {"wait_sums": f"ARRAY[{sums}]"}


def _run_sums() -> dict[str, str]:
    """``ARRAY[sum(runs[1]), ...]``: each bucket of the run-time histograms summed."""
    sums = ", ".join(f"sum(k.runs[{b}])::bigint" for b in range(1, len(WAIT_BOUNDS_S) + 2))
    return {"run_sums": f"ARRAY[{sums}]"}


READ_MINUTES = Statement("read_minutes", ReadMinutesParams, SQL_DIR, build_parts=_wait_sums)
READ_KIND_MINUTES = Statement(
    "read_kind_minutes", ReadMinutesParams, SQL_DIR, build_parts=_run_sums
)
# The label a kind no one registers is counted under in the minutes (as UNDECLARED for lanes).
UNKNOWN_KIND = "(unknown)"
READ_ROLLUP_PLACE = Statement("read_rollup_place", NoParams, SQL_DIR)


@dataclass(frozen=True)
class RolledUp:
    """What one call of the rollup did."""

    # Attempts counted, and whether this minute's pending items were counted by this call.
    attempts: int
    sampled: bool
    # Whether it stopped at its batch budget with attempts left before its mark (the next
    # pass goes on), rather than caught up or waiting for transactions to end.
    behind: bool


@transition
def roll_up_minutes(
    batch: int | None = None, max_batches: int | None = None, retention_s: float | None = None
) -> Plan[RolledUp]:
    """Count the attempts ended since the last call into their minute's rows (per tenant and
    lane: done, failed, dead letters, the waits' histogram), ``batch`` attempts per statement
    (``ROLLUP_BATCH``), at most ``max_batches`` statements (``SWEEP_MAX_BATCHES``), passing
    over those that ended before ``retention_s`` (``ROLLUP_RETENTION_S``); and, at the first
    call of a minute, each tenant's pending items per lane. Each statement adds its attempts
    and moves the rollup's place in one transaction, so an attempt is counted once however
    often it runs, or however many run.

    Takes no tenant: one statement counts every tenant's attempts of a batch, on the system
    login (the sweep's), and each row it writes is its tenant's, read back under row-level
    security."""
    lanes, bounds, kinds = declared_lanes(), [float(b) for b in WAIT_BOUNDS_S], known_kinds()
    batch = int(batch or wq_settings.ROLLUP_BATCH)
    budget = int(max_batches or wq_settings.SWEEP_MAX_BATCHES)
    kept_s = float(retention_s or wq_settings.ROLLUP_RETENTION_S)
    params = RollUpParams(lanes, bounds, kinds, batch, MARK_GRACE_S, kept_s)
    attempts, behind, renewed, batches = 0, False, False, 0
    while batches < budget:
        rows: Rows = yield System(ROLL_UP_MINUTES, params)
        found, counted, _minutes, settled, reached, more = rows.rows[0]
        if not found:  # the first pass ever: make the place, then go on
            yield System(START_ROLLUP, NoParams())
            rows = yield System(ROLL_UP_MINUTES, params)
            found, counted, _minutes, settled, reached, more = rows.rows[0]
        batches += 1
        attempts += int(counted)
        behind = bool(settled and not reached)
        if not settled:
            break  # the mark's transactions are still open: the next pass
        if behind:
            continue  # a full batch short of the mark
        # Reached the mark and took a new one: once more for what ended meanwhile (settled
        # unless a transaction of that moment is still open), then the next pass.
        if renewed or not more:
            break
        renewed = True
    sampled: Rows = yield System(SAMPLE_PENDING, SamplePendingParams(lanes, bounds, kinds))
    return RolledUp(attempts, bool(sampled.rows[0][0]) if sampled.rows else False, behind)


# The day partitions made ahead of the database's clock.
MINUTES_AHEAD_S = 2 * 86400.0


@dataclass(frozen=True)
class KeptMinutes:
    """What one call of ``keep_minutes`` did: days made, dropped, and left for a later pass (a
    session held a lock on them)."""

    made: int
    dropped: int
    waiting: int


@transition
def keep_minutes(retention_s: float) -> Plan[KeptMinutes]:
    """Make the day partitions of the minutes from ``retention_s`` ago to two days ahead, and
    drop each whose whole day ended more than ``retention_s`` ago. Takes no tenant: a day holds
    every tenant's minutes, and the sweep's retention is the site's (system login)."""
    rows: Rows = yield System(KEEP_MINUTES, KeepMinutesParams(retention_s, MINUTES_AHEAD_S))
    made, dropped, waiting = rows.rows[0]
    return KeptMinutes(int(made), int(dropped), int(waiting))


@dataclass(frozen=True)
class Span:
    """What a span of the charts (a minute, or ten) came to, in one lane or several."""

    start: datetime
    done: int = 0
    failed: int = 0
    dead: int = 0
    # Pending items: the most of any minute in the span (summed over tenants and lanes).
    pending: int = 0
    # Claims per wait bucket (``WAIT_BOUNDS_S``), every bucket present.
    waits: tuple[int, ...] = (0,) * (len(WAIT_BOUNDS_S) + 1)

    @property
    def claims(self) -> int:
        return sum(self.waits)

    def plus(self, other: Span) -> Span:
        """Both spans' figures (the same start) as one, as over two lanes."""
        return Span(
            self.start,
            self.done + other.done,
            self.failed + other.failed,
            self.dead + other.dead,
            self.pending + other.pending,
            tuple(a + b for a, b in zip(self.waits, other.waits, strict=True)),
        )


def quantile(waits: Sequence[int], q: float) -> float | None:
    """The wait that a share ``q`` of the claims counted in ``waits`` waited at most: the upper
    bound of the bucket the q-th claim falls in (the last bound for the last bucket, which is
    open). None when no claim is counted."""
    total = sum(waits)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for k, n in enumerate(waits):
        seen += n
        if seen >= rank:
            return float(WAIT_BOUNDS_S[min(k, len(WAIT_BOUNDS_S) - 1)])
    return float(WAIT_BOUNDS_S[-1])


@dataclass(frozen=True)
class Minutes:
    """The charts' figures: one ``Span`` per span start, oldest first, per lane."""

    bin_s: int
    starts: list[datetime]
    lanes: dict[str, list[Span]] = field(default_factory=dict)

    def total(self, lane: str | None = None) -> list[Span]:
        """Each span summed over every lane (or ``lane``'s alone)."""
        chosen = [self.lanes[lane]] if lane is not None else list(self.lanes.values())
        spans = [Span(start) for start in self.starts]
        for series in chosen:
            spans = [a.plus(b) for a, b in zip(spans, series, strict=True)]
        return spans


def _minutes(bin_s: int, bins: int) -> Plan[Minutes]:
    rows: Rows = yield System(READ_MINUTES, ReadMinutesParams(bin_s, bins))
    first = rows.rows[0][0]
    starts = [first + timedelta(seconds=bin_s * i) for i in range(bins)]
    place = {start: i for i, start in enumerate(starts)}
    lanes: dict[str, list[Span]] = {}
    for _first, start, lane, done, failed, dead, pending, waits in rows.rows:
        if lane is None or start not in place:
            continue
        series = lanes.setdefault(lane, [Span(s) for s in starts])
        counts = tuple(int(n or 0) for n in waits)
        series[place[start]] = Span(start, done, failed, dead, pending or 0, counts)
    return Minutes(bin_s, starts, dict(sorted(lanes.items())))


@transition
def read_minutes(bin_s: int = 60, bins: int = 60, org_id: uuid.UUID | None = None) -> Plan[Minutes]:
    """The last ``bins`` spans of ``bin_s`` seconds (the current one last, still counting),
    per lane: every tenant's (system login) or, with ``org_id``, that tenant's only (under its
    row-level security)."""
    bin_s = max(60, min(int(bin_s), 86_400))
    bins = max(1, min(int(bins), 1440))
    return (yield from under_tenant(_minutes(bin_s, bins), org_id))


@dataclass(frozen=True)
class KindSpan:
    """What a span came to for one kind in one lane: the longest its oldest due item was seen
    waiting (None: none was due at a sampled minute), and its attempts' run times."""

    start: datetime
    oldest_wait_s: float | None = None
    runs: tuple[int, ...] = (0,) * (len(WAIT_BOUNDS_S) + 1)


@dataclass(frozen=True)
class KindMinutes:
    """The kinds' figures: one ``KindSpan`` per span start, oldest first, per (lane, kind)."""

    bin_s: int
    starts: list[datetime]
    kinds: dict[tuple[str, str], list[KindSpan]] = field(default_factory=dict)


def _kind_minutes(bin_s: int, bins: int) -> Plan[KindMinutes]:
    rows: Rows = yield System(READ_KIND_MINUTES, ReadMinutesParams(bin_s, bins))
    first = rows.rows[0][0]
    starts = [first + timedelta(seconds=bin_s * i) for i in range(bins)]
    place = {start: i for i, start in enumerate(starts)}
    kinds: dict[tuple[str, str], list[KindSpan]] = {}
    for _first, start, lane, kind, oldest, runs in rows.rows:
        if lane is None or start not in place:
            continue
        series = kinds.setdefault((lane, kind), [KindSpan(s) for s in starts])
        counts = tuple(int(n or 0) for n in runs)
        series[place[start]] = KindSpan(start, None if oldest is None else float(oldest), counts)
    return KindMinutes(bin_s, starts, dict(sorted(kinds.items())))


@transition
def read_kind_minutes(
    bin_s: int = 60, bins: int = 60, org_id: uuid.UUID | None = None
) -> Plan[KindMinutes]:
    """``read_minutes`` per lane and kind: the oldest due item's wait and the attempts' run
    times; every tenant's (system login) or ``org_id``'s only (row-level security)."""
    bin_s = max(60, min(int(bin_s), 86_400))
    bins = max(1, min(int(bins), 1440))
    return (yield from under_tenant(_kind_minutes(bin_s, bins), org_id))


@transition
def read_rollup_place() -> Plan[tuple[datetime | None, datetime]]:
    """When the rollup last caught up with the attempts (None: it never ran) and the
    database's now. The place belongs to no tenant: read on the system login."""
    rows: Rows = yield System(READ_ROLLUP_PLACE, NoParams())
    marked_at, now_at = rows.rows[0]
    return marked_at, now_at
