"""The reporter: writes what running handlers reported (``run.progress``, ``run.set_meta``) to
their items, throttled.

A handler's report is only recorded in memory (``workqueue/progress.py``), so a loop may report
on every row. A few times per ``WORKER_PROGRESS_FLUSH_S`` (on the periodic primitive,
``Worker._progress_task``) the reporter writes every held item whose report changed and was not
written for that interval, in one statement for all of them on the system login, fenced by each
item's (org, id, claim token) (``runtime.awrite_progress``): an item is written at most once
per interval however often its handler reports. Before an item's outcome is written (its
batched completion, a failure, a snooze, a cancel, a hand-back) its last report is written
first (``flush_final``), whatever the throttle, so the final value is never lost.

A write the fence refused (the item was lost to another holder) is counted as a stale write
(``workqueue_stale_writes_refused_total``) and logged, never raised in the handler; the item is
no longer watched. A write that failed otherwise (the database is away) keeps its reports for
the next. The periodic writes and the final ones take turns (one lock): a periodic write on
its way when an item's outcome is due lands first, never after the outcome, where its fence
would refuse it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from workers.metrics import PROGRESS_WRITES
from workers.outage import Outage
from workqueue import runtime
from workqueue.runtime import Fence, Report, Reported
from wqcore.logs import log_event

logger = logging.getLogger(__name__)


@dataclass
class _Watched:
    fence: Fence
    report: Report
    kind: str
    # When its report was last written (the reporter's clock).
    written_at: float = -math.inf
    # Its outcome is due: only ``flush_final`` writes it now.
    ending: bool = False


class Reporter:
    """The reports of the items a worker holds, written on the worker's loop."""

    def __init__(
        self, outage: Outage, *, interval_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.outage = outage
        self.interval_s = interval_s
        self._clock = clock
        self._watched: dict[uuid.UUID, _Watched] = {}
        self._turn = asyncio.Lock()

    @property
    def tick_s(self) -> float:
        """How often ``flush_due`` looks for due reports: a few times per interval, so an item
        is written within about an interval of the last, not two when a tick runs late."""
        return max(self.interval_s / 4, 0.05)

    def __len__(self) -> int:
        return len(self._watched)

    def watch(self, fence: Fence, report: Report, kind: str) -> None:
        """Write what ``report`` gets to ``fence``'s item, from now until its outcome."""
        self._watched[fence.item_id] = _Watched(fence, report, kind)

    def forget(self, item_id: uuid.UUID) -> None:
        """Stop watching the item: its outcome is written (or it was lost to another holder).
        Called by whoever wrote the outcome: the runner, or the completer for a batch."""
        self._watched.pop(item_id, None)

    async def flush_due(self) -> int:
        """Write every report that changed and whose item was not written for an interval;
        returns how many items were written. A failure is raised (the periodic task reports
        it) with the reports kept for the next write."""
        async with self._turn:
            now = self._clock()
            due = [
                watched
                for watched in self._watched.values()
                if watched.report.changed
                and not watched.ending
                and now - watched.written_at >= self.interval_s
            ]
            return await self._write(due, now)

    async def flush_final(self, fences: Iterable[Fence]) -> None:
        """Write the last reports of these items, whatever the throttle, just before their
        outcome is written; from here on only this writes them, until ``forget``. Never raises
        but a cancellation: an outcome is never held back by its report. A failure is logged
        (once per outage) and the reports kept for the outcome's retry."""
        async with self._turn:
            ending = []
            for fence in fences:
                watched = self._watched.get(fence.item_id)
                if watched is not None and watched.fence == fence:
                    watched.ending = True
                    ending.append(watched)
            try:
                await self._write(ending, self._clock())
            except Exception as exc:
                if not self.outage.failed("progress", exc):
                    log_event(
                        logger,
                        logging.ERROR,
                        "progress_write_failed",
                        exc_info=True,
                        items=len(ending),
                    )

    async def _write(self, watched: list[_Watched], now: float) -> int:
        """One statement for every report that has something to write."""
        taken = [(w, t) for w in watched if (t := w.report.take()) is not None]
        if not taken:
            return 0
        started = self.outage.now()
        try:
            written = await runtime.awrite_progress([Reported.of(w.fence, t) for w, t in taken])
        except BaseException:  # a cancellation too: what was taken is written next time
            for w, t in taken:
                w.report.put_back(t)
            raise
        self.outage.ok(started)
        for w, _ in taken:
            w.written_at = now
            if w.fence.item_id not in written:
                self.forget(w.fence.item_id)
                log_event(
                    logger,
                    logging.WARNING,
                    "stale_progress_refused",
                    item=str(w.fence.item_id),
                    kind=w.kind,
                    tenant=str(w.fence.org_id),
                )
        PROGRESS_WRITES.inc(len(written))
        return len(written)
