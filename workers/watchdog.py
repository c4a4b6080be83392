"""The loop watchdog: notices, from outside the worker's event loop, that the loop is blocked.

Async handlers share one event loop with the worker's own parts. A handler that blocks it
(``time.sleep``, a sync driver, a long computation) stops every other item of the process on
that loop, the claims, the completions, the heartbeat and the listener, for as long as it
blocks. The lease renewals go on (they run on a thread of their own, ``offloop.py``), so the
items are not lost; but the author should hear of it, and move the work to a sync handler or
``run.in_thread``.

``check`` runs on the periodic primitive on that other thread, every quarter of ``warn_s``: it
sends the loop a probe (``call_soon_threadsafe``, which wakes an idle loop at once) and looks
whether the last one was answered. A probe left unanswered for ``warn_s`` starts a blocking
episode: one warning naming the items running on the loop (``describe``) and the line the
loop's thread is on, and ``workqueue_worker_loop_blocked_total`` counts it. When the probe is
answered the episode ends: a second line says how long it lasted, and
``workqueue_worker_loop_blocked_seconds`` observes it. A probe is sent only once the last one
was answered, so a blocked loop piles up no callbacks.

When ``check`` itself ran late by more than ``warn_s``, the whole process was stopped (SIGSTOP,
a suspended host), not the loop alone: every thread, this one too, lost the time, so the
unanswered probe says nothing about the loop. It is sent again instead of reported.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

from workers.metrics import LOOP_BLOCKED, LOOP_BLOCKED_SECONDS
from wqcore.logs import log_event

logger = logging.getLogger(__name__)


class LoopWatchdog:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        warn_s: float,
        *,
        describe: Callable[[], dict[str, str]],
        loop_thread: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not warn_s > 0:
            raise ValueError(f"warn_s must be positive, not {warn_s!r}")
        self._loop = loop
        self.warn_s = warn_s
        self._describe = describe
        # The thread the loop runs on (made on it by default): where it is stuck is logged.
        self._loop_thread = threading.get_ident() if loop_thread is None else loop_thread
        self._clock = clock
        self._lock = threading.Lock()
        self._sent_at: float | None = None
        self._answered_at: float | None = None
        # The episode under way, once reported: what was running on the loop.
        self._blocked: dict[str, str] | None = None
        self._checked_at: float | None = None
        self.episodes = 0

    @property
    def interval_s(self) -> float:
        """How often ``check`` should run: a block is reported at most a quarter late."""
        return self.warn_s / 4

    @property
    def blocked(self) -> bool:
        return self._blocked is not None

    async def check(self) -> None:
        """Look at the last probe; report a block once per episode; send the next probe."""
        now = self._clock()
        checked_at, self._checked_at = self._checked_at, now
        with self._lock:
            sent, answered = self._sent_at, self._answered_at
        late = checked_at is not None and now - checked_at > self.warn_s
        if late and answered is None and self._blocked is None:
            self._probe(now)  # the process was stopped, this thread too: ask the loop again
            return
        if sent is not None and answered is None:
            blocked_s = now - sent
            if blocked_s >= self.warn_s and self._blocked is None:
                self._began(blocked_s)
            return
        if self._blocked is not None and sent is not None and answered is not None:
            self._ended(answered - sent)
        self._probe(now)

    def _probe(self, now: float) -> None:
        with self._lock:
            self._sent_at, self._answered_at = now, None
        try:
            self._loop.call_soon_threadsafe(self._answer)
        except RuntimeError:  # the loop is closed: the worker is ending
            pass

    def _answer(self) -> None:
        """On the loop: it ran."""
        with self._lock:
            self._answered_at = self._clock()

    def _began(self, blocked_s: float) -> None:
        self._blocked = self._describe()
        self.episodes += 1
        LOOP_BLOCKED.inc()
        log_event(
            logger,
            logging.WARNING,
            "worker_loop_blocked",
            blocked_s=round(blocked_s, 1),
            **self._blocked,
            where=self._where(),
            hint="the event loop has not run for this long; sync work belongs in a sync handler "
            "or run.in_thread",
        )

    def _ended(self, blocked_s: float) -> None:
        LOOP_BLOCKED_SECONDS.observe(blocked_s)
        log_event(
            logger,
            logging.WARNING,
            "worker_loop_unblocked",
            blocked_s=round(blocked_s, 1),
            **(self._blocked or {}),
        )
        self._blocked = None

    def _where(self) -> str:
        """The line the loop's thread is running now (CPython's ``sys._current_frames``)."""
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "-"
        code = frame.f_code
        path = code.co_filename
        try:
            relative = os.path.relpath(path)
        except ValueError:  # another drive (Windows)
            relative = path
        if not relative.startswith(".."):
            path = relative
        return f"{path}:{frame.f_lineno}:{code.co_name}"
