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
import time
from collections.abc import Callable, Iterable, Sequence

from workers.jobs import Jobs
from workers.metrics import PROGRESS_WRITES
from workers.outage import Outage
from workqueue import runtime
from workqueue.runtime import Fence, Report, Reported
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

# An item whose outcome is due: its fence, its run's report (None: it reported nothing), its kind.
Ending = tuple[Fence, Report | None, str]


class Reporter:
    """The reports of the items a worker holds, written on the worker's loop."""

    def __init__(
        self, outage: Outage, *, interval_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.outage = outage
        self.interval_s = interval_s
        self._clock = clock
        # The items held, with their runs: the runner's jobs (set by the runner). Only a run
        # that reported has a report: the others cost the reporter nothing.
        self.jobs: Jobs | None = None
        self._turn = asyncio.Lock()

    @property
    def tick_s(self) -> float:
        """How often ``flush_due`` looks for due reports: a few times per interval, so an item
        is written within about an interval of the last, not two when a tick runs late."""
        return max(self.interval_s / 4, 0.05)

    async def flush_due(self) -> int:
        """Write every report that changed and whose item was not written for an interval;
        returns how many items were written. A failure is raised (the periodic task reports
        it) with the reports kept for the next write."""
        if self.jobs is None:
            return 0
        async with self._turn:
            now = self._clock()
            due = [
                (job.fence, report, job.item.kind)
                for job in self.jobs.running()
                if (report := job.run.report) is not None
                and report.changed
                and not report.final
                and now - report.written_at >= self.interval_s
            ]
            return await self._write(due, now)

    async def flush_final(self, ending: Iterable[Ending]) -> None:
        """Write the last reports of these items, whatever the throttle, just before their
        outcome is written; from here on only this writes them. Never raises but a
        cancellation: an outcome is never held back by its report. A failure is logged (once
        per outage) and the reports kept for the outcome's retry. Items whose run reported
        nothing pass at once."""
        reported = [(fence, report, kind) for fence, report, kind in ending if report is not None]
        if not reported:
            return
        for _, report, _ in reported:
            report.final = True
        async with self._turn:  # a periodic write on its way lands first
            try:
                await self._write(reported, self._clock())
            except Exception as exc:
                if not self.outage.failed("progress", exc):
                    log_event(
                        logger,
                        logging.ERROR,
                        "progress_write_failed",
                        exc_info=True,
                        items=len(reported),
                    )

    async def _write(self, reports: Sequence[Ending], now: float) -> int:
        """One statement for every report that has something to write."""
        taken = [(f, r, k, t) for f, r, k in reports if r is not None and (t := r.take())]
        if not taken:
            return 0
        started = self.outage.now()
        try:
            written = await runtime.awrite_progress([Reported.of(f, t) for f, _, _, t in taken])
        except BaseException:  # a cancellation too: what was taken is written next time
            for _, report, _, t in taken:
                report.put_back(t)
            raise
        self.outage.ok(started)
        for fence, report, kind, _ in taken:
            report.written_at = now
            if fence.item_id not in written:
                report.final = True  # lost to another holder: never written again
                log_event(
                    logger,
                    logging.WARNING,
                    "stale_progress_refused",
                    item=str(fence.item_id),
                    kind=kind,
                    tenant=str(fence.org_id),
                )
        PROGRESS_WRITES.inc(len(written))
        return len(written)
