"""Sweep step: done items out of the hot table (``workqueue/history.py``). Makes the history
children the coming spans need, moves the done items that ended more than ``HISTORY_AFTER_S``
ago into them (oldest first, from where this process's last move stopped), and drops each child
whose span is past ``ITEM_RETENTION_S`` whole. A child a report is reading is dropped at a later
pass; the purge deletes what such a child holds past the retention meanwhile."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import runtime

# Where this process's next move starts: the newest updated_at its last one moved, so a move
# does not walk the index entries of the rows moved before it (dead until a vacuum, which a held
# snapshot delays). Every RESCAN_S it starts again at the retention's edge, for the items a move
# passed over: held by another transaction then, or completed by a transaction that began
# before the mark (an item's updated_at is its transaction's now()).
RESCAN_S = 600.0
_since: dict[str, tuple[datetime, float]] = {}


@dataclass(frozen=True)
class Kept:
    made: int
    moved: int
    dropped: int
    waiting: int


def run_once(rctx: RequestContext, settings: SweepSettings) -> Kept | None:
    if not settings.history:
        return None
    retention_s = settings.item_retention_s
    made = runtime.keep_history(retention_s, settings.history_span_s)
    mark = _since.get("done")
    if mark is None or time.monotonic() - mark[1] > RESCAN_S:
        mark = (db_now_minus(retention_s), time.monotonic())
    since = mark[0]
    moved = runtime.move_history(
        since, settings.history_after_s, batch=settings.batch, max_batches=settings.max_batches
    )
    if moved.unkept:
        # The oldest item's span has no child (made since by another keeper, or the span width
        # changed): make it, and move at the next pass.
        made += runtime.keep_history(retention_s, settings.history_span_s)
    _since["done"] = (moved.through, mark[1])
    dropped = runtime.drop_history(retention_s)
    return Kept(made, moved.moved, dropped.dropped, dropped.waiting)
