"""Completing in batches: finished items share one ``acomplete_many`` statement, each with its
result (JSON text, or None).

A finished item is queued here; the flusher waits at most ``flush_ms`` for more to join, then
completes the batch on the system login, fenced by each item's (org, id, claim token). A batch
that fails (the database is away) is kept and retried; an item the statement refused had lost
its claim to another holder (the store counts it). The claim loop takes no more work while more
finished items than the worker's capacity wait here (``backlog``): claims never run far ahead
of completions, so a worker that dies leaves at most about that many finished items to run
again. A full batch (``flush_at`` items) is written at once, without the wait. Each batch's
last progress reports (``run.progress``) are written just before it (``reporting.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from workers.metrics import for_kind
from workers.outage import Outage
from workers.reporting import Reporter
from workqueue import runtime
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

# A finished item: its fence, kind, result (JSON text or None) and run's report (or None).
Finished = tuple[runtime.Fence, str, str | None, runtime.Report | None]


class Completer:
    def __init__(
        self,
        outage: Outage,
        *,
        flush_ms: int,
        flush_at: int = 100,
        retry_s: float = 0.5,
        reporter: Reporter | None = None,
    ) -> None:
        self.outage = outage
        # Writes each item's last progress report before its completion (reporting.py).
        self.reporter = reporter
        self.flush_s = flush_ms / 1000
        self.flush_at = flush_at
        self.retry_s = retry_s
        # (fence, kind, result as JSON text or None, its run's report or None) of each
        # finished item.
        self.pending: list[Finished] = []
        self.waiting = asyncio.Event()
        # Items in the batch being written now, and an event set after each write: the claim
        # loop waits on it while ``backlog`` is full.
        self.writing = 0
        self.written = asyncio.Event()
        # Batches written so far: a claim that ran while one was written may have missed the
        # workflow steps it made due (a drain in once mode looks again).
        self.writes = 0

    @property
    def backlog(self) -> int:
        """Finished items whose completion is not written yet."""
        return len(self.pending) + self.writing

    def add(
        self,
        fence: runtime.Fence,
        kind: str,
        result: str | None = None,
        report: runtime.Report | None = None,
    ) -> None:
        self.pending.append((fence, kind, result, report))
        self.waiting.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Flush as completions arrive, until ``stop``; the caller flushes once more after."""
        while not stop.is_set():
            await self.waiting.wait()
            self.waiting.clear()
            if self.flush_s and not stop.is_set() and len(self.pending) < self.flush_at:
                await asyncio.sleep(self.flush_s)  # let more completions share the statement
            await self.flush(stop)

    async def flush(self, stop: asyncio.Event | None = None) -> None:
        """Complete everything queued; a failed batch is retried until it lands or ``stop``."""
        while self.pending:
            batch, self.pending = self.pending, []
            started = self.outage.now()
            self.writing = len(batch)
            try:
                if self.reporter is not None:
                    await self.reporter.flush_final(
                        (fence, report, kind) for fence, kind, _, report in batch
                    )
                done = await runtime.acomplete_many(
                    [fence for fence, _, _, _ in batch], [result for _, _, result, _ in batch]
                )
            except Exception as exc:
                if not self.outage.failed("complete", exc):
                    log_event(
                        logger, logging.ERROR, "complete_failed", exc_info=True, items=len(batch)
                    )
                self.pending[:0] = batch  # kept: retried by the next flush
                if stop is not None and stop.is_set():
                    return
                await asyncio.sleep(self.retry_s)
                continue
            finally:
                self.writing = 0
                self.written.set()
            self.outage.ok(started)
            self.writes += 1
            counts: Counter[str] = Counter()
            # As many ids as fences: every one completed (an item sent twice, under an older
            # and a newer claim, is completed once at most, under the one that holds it).
            every = len(done) == len(batch)
            for fence, kind, _, _ in batch:
                if every or fence in done.fences:
                    counts[kind] += 1
                else:
                    log_event(
                        logger,
                        logging.WARNING,
                        "stale_complete_refused",
                        item=str(fence.item_id),
                        kind=kind,
                        tenant=str(fence.org_id),
                    )
            for kind, n in counts.items():
                for_kind(kind).completed.inc(n)
            await _send_done(batch, done)


async def _send_done(batch: list[Finished], done: runtime.Completed) -> None:
    """``work_done`` for each completed item of ``batch``, when someone listens for its kind
    (workqueue/signals.py)."""
    if not runtime.work_done.has_listeners(runtime.WorkItem):
        return
    every = len(done) == len(batch)
    for fence, kind, _, _ in batch:
        if every or fence in done.fences:
            results = await runtime.work_done.asend_robust(
                runtime.WorkItem, item_id=fence.item_id, org_id=fence.org_id, kind=kind
            )
            runtime.log_receiver_failures("work_done", results)
