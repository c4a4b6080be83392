"""The ready ring: where the claim finds pending items (``models/ready.py`` says why).

Every statement that makes an item pending writes its ready row in the same statement
(``READY_ROWS``, ``sql/ready_rows.sql``) and sets its ``ringed_at``; the claim deletes the rows
it takes; a cancel or discard of a pending item forgets its row (``workqueue_ready_forget``).
``rotate_ready`` turns the ring: run about every second by every worker (one at a time acts),
it promotes the items due within the ring's reach from slot 0, gives a ready row to any pending
item that has none (written by a release before the ring), and empties each slot that is
neither this second's nor the last's once it has grown, moving what it still holds first. The
item's status stays the truth: a ready row whose item is no longer pending is passed over by
the claim's update, deleted with the rows the claim took, and dropped by the rotation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from workqueue import SQL_DIR
from wqcore.conf import wq_settings
from wqcore.statements import NoParams, Statement
from wqcore.store import Plan, Rows, System, transition

# Included by every statement that makes an item pending, over its ``made_pending`` rows.
READY_ROWS = Statement("ready_rows", NoParams, SQL_DIR)
# Included by every statement that ends a pending item otherwise than by a claim (a cancel, a
# discard), over its ``moved`` rows.
FORGET_READY = Statement("forget_ready", NoParams, SQL_DIR)


class RotateParams(NamedTuple):
    # A slot is emptied once its file has grown to this (fewer pages cost a claim little).
    min_bytes: int
    # A slot holding more than this many rows is a backlog: left for a later turn, unless its
    # claims have left more dead rows in it than it holds (they walk those at every claim).
    max_rows: int
    # At most this many later items promoted, and unringed items given a row, per turn.
    batch: int
    # How long the turn waits for a slot's lock before leaving it for the next turn.
    lock_timeout_ms: int


ROTATE_READY = Statement("rotate_ready", RotateParams, SQL_DIR)


@dataclass(frozen=True)
class Rotated:
    """What one turn of the ring did (``turn`` false: another rotator had it)."""

    turn: bool
    promoted: int
    adopted: int
    emptied: int
    moved: int
    held: int

    def __bool__(self) -> bool:
        return bool(self.promoted or self.adopted or self.emptied or self.held)


@transition
def rotate_ready() -> Plan[Rotated]:
    """Turn the ready ring once (``workqueue_rotate_ready_v2``): one statement.

    Takes no tenant: the ring holds every tenant's pending items, and emptying a partition
    is one act for all of them (on the system login, which alone may TRUNCATE it)."""
    params = RotateParams(
        int(wq_settings.READY_COMPACT_MIN_BYTES),
        int(wq_settings.READY_COMPACT_MAX_ROWS),
        int(wq_settings.READY_BATCH),
        int(wq_settings.READY_LOCK_TIMEOUT_MS),
    )
    rows: Rows = yield System(ROTATE_READY, params)
    return Rotated(*rows.rows[0])


arotate_ready = rotate_ready.aio


class BringForwardParams(NamedTuple):
    lane: str
    kinds: list[str]


BRING_FORWARD = Statement("bring_forward", BringForwardParams, SQL_DIR, includes=(READY_ROWS,))


@transition
def bring_forward(lane: str, kinds: list[str]) -> Plan[int]:
    """Make the pending items of ``lane``'s ``kinds`` that wait for a later time (a retry's
    delay, a snooze, ``available_at``) due now, by the database's clock; returns how many.
    For a test's drain of what is scheduled: a production queue waits for the time it was
    given. Takes no tenant (a test's drain runs every tenant's items of the lane)."""
    rows: Rows = yield System(BRING_FORWARD, BringForwardParams(lane, list(kinds)))
    return int(rows.rows[0][0])
