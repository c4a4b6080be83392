"""History: where done items go once they ended ``HISTORY_AFTER_S`` ago, so the hot table
holds what is waiting, running and just ended, not the week of done items the retention keeps
(``sql/schema/history_v1.sql``). Each span of ``HISTORY_SPAN_S`` has its child table of the
item table: every reader of items (the admin, results, statuses, workflows, the API, the
enqueue's check that an id or key is taken) reads it through the item table as before, and
every statement that asks for another status leaves it out at planning (its CHECK). The sweep
makes the children ahead (``keep_history``), moves done items into them in batches, oldest
first (``move_history``), and drops a child whole once its span is past ``ITEM_RETENTION_S``
(``drop_history``): no row-by-row DELETE, no dead tuple, no VACUUM of history. A workflow's
items stay in the hot table (their edges and places go with them at the purge).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from workqueue import SQL_DIR
from wqcore.logs import log_event
from wqcore.statements import NoParams, Statement
from wqcore.store import Plan, Rows, System, transition

logger = logging.getLogger(__name__)


class KeepParams(NamedTuple):
    # The children cover from this many seconds ago (the retention: older items are purged,
    # never moved) to this many ahead (so the move never waits for a child to be made).
    from_s: float
    ahead_s: float
    width_s: float


class MoveParams(NamedTuple):
    # Where this batch starts: the newest updated_at the batch before it moved.
    since: datetime
    # Items that ended less than this long ago stay in the hot table.
    after_s: float
    batch: int


class MoveTimedParams(NamedTuple):
    # A timed table (workqueue_history_timed): its finished rows move by a time of their own.
    table: str
    since: datetime
    after_s: float
    batch: int


class DropParams(NamedTuple):
    retention_s: float
    # Timed tables whose children go earlier, each after its own retention.
    tables: list[str]
    retentions_s: list[float]


KEEP_HISTORY = Statement("keep_history", KeepParams, SQL_DIR)
MOVE_HISTORY = Statement("move_history", MoveParams, SQL_DIR)
MOVE_TIMED_HISTORY = Statement("move_timed_history", MoveTimedParams, SQL_DIR)
DROP_HISTORY = Statement("drop_history", DropParams, SQL_DIR)
READ_HISTORY = Statement("read_history", NoParams, SQL_DIR)


@transition
def keep_history(retention_s: float, width_s: float) -> Plan[int]:
    """Make the history children the coming spans and the retention need; returns how many
    were made. Takes no tenant: a child holds every tenant's items (system login)."""
    rows: Rows = yield System(KEEP_HISTORY, KeepParams(retention_s, 2 * width_s, width_s))
    return int(rows.rows[0][0])


@dataclass(frozen=True)
class Moved:
    """What one call of ``move_history`` moved, and where the next one starts."""

    moved: int
    through: datetime
    # The oldest item to move had no child (the keeper had not made it): moved nothing.
    unkept: bool = False


@transition
def move_history(
    since: datetime, after_s: float, batch: int = 1000, max_batches: int = 20
) -> Plan[Moved]:
    """Move done items that ended at or after ``since`` and more than ``after_s`` ago into
    history, ``batch`` at a time (one statement each, rows another transaction holds skipped),
    at most ``max_batches``; stops at a short batch. Returns how many and the newest
    ``updated_at`` moved: the next call's ``since``, so no call walks the index entries its
    predecessors' moves left behind (dead until a vacuum, which a held snapshot delays).
    Takes no tenant (system login)."""
    moved = yield from _moving(
        lambda through: System(MOVE_HISTORY, MoveParams(through, after_s, batch)),
        since,
        batch,
        max_batches,
    )
    if moved.moved:
        log_event(
            logger,
            logging.INFO,
            "history_moved",
            count=moved.moved,
            through=moved.through.isoformat(),
        )
    return moved


@transition
def move_timed_history(
    table: str, since: datetime, after_s: float, batch: int = 1000, max_batches: int = 20
) -> Plan[Moved]:
    """``move_history`` for a timed table (``workqueue_history_timed``: the API's stored
    answers, the relayed outbox rows): its finished rows whose own time is at or after
    ``since`` and more than ``after_s`` ago. Takes no tenant (system login)."""
    moved = yield from _moving(
        lambda through: System(MOVE_TIMED_HISTORY, MoveTimedParams(table, through, after_s, batch)),
        since,
        batch,
        max_batches,
    )
    if moved.moved:
        log_event(logger, logging.INFO, "history_moved", table=table, count=moved.moved)
    return moved


def _moving(
    step: Callable[[datetime], System], since: datetime, batch: int, max_batches: int
) -> Plan[Moved]:
    """Batches of a move from ``since``, each from where the one before stopped, until a short
    one (nothing more has ended long enough ago) or ``max_batches``."""
    total, through = 0, since
    for _ in range(max_batches):
        rows: Rows = yield step(through)
        moved, through = int(rows.rows[0][0]), rows.rows[0][1]
        if moved < 0:
            return Moved(total, through, unkept=True)
        total += moved
        if moved < batch:
            break
    return Moved(total, through)


@dataclass(frozen=True)
class Dropped:
    dropped: int
    # Children past the retention that a session was reading: dropped at a later pass.
    waiting: int


@transition
def drop_history(retention_s: float, timed: dict[str, float] | None = None) -> Plan[Dropped]:
    """Drop the history children whose span ended more than ``retention_s`` ago, each whole,
    and before that those of each timed table in ``timed`` whose span ended more than its own
    retention ago; a child another session holds a lock on is left for a later pass (nothing
    waits behind the drop). Takes no tenant (system login)."""
    timed = timed or {}
    params = DropParams(retention_s, list(timed), list(timed.values()))
    rows: Rows = yield System(DROP_HISTORY, params)
    dropped = Dropped(int(rows.rows[0][0]), int(rows.rows[0][1]))
    if dropped.dropped or dropped.waiting:
        log_event(
            logger,
            logging.INFO,
            "history_dropped",
            dropped=dropped.dropped,
            waiting=dropped.waiting,
        )
    return dropped


@dataclass(frozen=True)
class HistorySpan:
    """One span of history: its tables' suffix, its bounds, its items and its tables' bytes as
    the statistics last counted them (no scan)."""

    stamp: str
    lo: datetime
    hi: datetime
    items: int
    bytes: int


@transition
def read_history() -> Plan[list[HistorySpan]]:
    """The spans of history, oldest first. Takes no tenant (the operator's view; system login)."""
    rows: Rows = yield System(READ_HISTORY, NoParams())
    return [HistorySpan(*row) for row in rows.rows]
