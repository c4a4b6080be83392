"""Sweep step: finished rows out of the hot tables (``workqueue/history.py``). Makes the history
children the coming spans need, moves the done items that ended more than ``HISTORY_AFTER_S``
ago into them (oldest first, from where this process's last move stopped), and the finished
rows of the timed tables (the API's stored answers, the relayed outbox rows) by their own time;
drops each table's children whose span is past its retention whole (the items' and their
followers' at ``ITEM_RETENTION_S``). A child a report is reading is dropped at a later pass;
the purges delete what such a child holds past the retention meanwhile."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import runtime
from wqcore.conf import wq_settings

# Where this process's next move starts, per table: the newest time its last one moved, so a
# move does not walk the index entries of the rows moved before it (dead until a vacuum, which a
# held snapshot delays). Every RESCAN_S it starts again at the retention's edge, for the rows a
# move passed over: held by another transaction then, or finished by a transaction that began
# before the mark (a row's time is its transaction's now()).
RESCAN_S = 600.0
_since: dict[str, tuple[datetime, float]] = {}


@dataclass(frozen=True)
class Kept:
    made: int
    moved: int
    # Rows of the timed tables moved.
    timed: int
    dropped: int
    waiting: int


def timed_retentions(settings: SweepSettings) -> dict[str, float]:
    """The timed tables that go to history, each with its retention: only those kept no longer
    than the items (a span's children all go when its items do); a longer-kept table stays in
    its table and its purge."""
    retentions = {
        "workqueue_storedresponse": float(wq_settings.IDEMPOTENCY_KEY_RETENTION_S),
        "workqueue_outbox_outboxrow": settings.outbox_retention_s,
    }
    return {t: r for t, r in retentions.items() if r <= settings.item_retention_s}


def _start(table: str, retention_s: float) -> datetime:
    mark = _since.get(table)
    if mark is None or time.monotonic() - mark[1] > RESCAN_S:
        mark = (db_now_minus(retention_s), time.monotonic())
        _since[table] = mark
    return mark[0]


def _went_to(table: str, through: datetime) -> None:
    _since[table] = (through, _since[table][1])


def _move(table: str, kept_s: float, settings: SweepSettings) -> tuple[int, bool]:
    """Move ``table``'s finished rows ("done": the items) in rounds of at most
    ``SWEEP_MAX_BATCHES`` statements of ``SWEEP_BATCH`` rows, each from where the last one
    stopped, while a round comes back full and for at most ``SWEEP_INTERVAL_S``: the move keeps
    up with arrivals faster than one round a pass (5,000 items/s is four rounds a pass at the
    defaults), and the sweep still spends at most about half its time moving. Returns how many
    moved, and whether the oldest row's span had no child."""
    deadline = time.monotonic() + settings.interval_s
    bounds = {"batch": settings.batch, "max_batches": settings.max_batches}
    total = 0
    while True:
        since = _start(table, kept_s)
        if table == "done":
            moved = runtime.move_history(since, settings.history_after_s, **bounds)
        else:
            moved = runtime.move_timed_history(table, since, settings.history_after_s, **bounds)
        _went_to(table, moved.through)
        total += moved.moved
        full = moved.moved >= settings.batch * settings.max_batches
        if moved.unkept or not full or time.monotonic() >= deadline:
            return total, moved.unkept


def run_once(rctx: RequestContext, settings: SweepSettings) -> Kept | None:
    if not settings.history:
        return None
    retention_s = settings.item_retention_s
    made = runtime.keep_history(retention_s, settings.history_span_s)
    timed = timed_retentions(settings)
    moves = {"done": _move("done", retention_s, settings)}
    for table, kept_s in timed.items():
        moves[table] = _move(table, kept_s, settings)
    if any(unkept for _, unkept in moves.values()):
        # The oldest row's span has no child (made since by another keeper, or the span width
        # changed): make it, and move at the next pass.
        made += runtime.keep_history(retention_s, settings.history_span_s)
    dropped = runtime.drop_history(retention_s, timed)
    timed_moved = sum(moved for table, (moved, _) in moves.items() if table != "done")
    return Kept(made, moves["done"][0], timed_moved, dropped.dropped, dropped.waiting)
