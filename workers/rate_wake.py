"""The rate wake: claim again when a rate limit that held items back allows one more.

A claim that comes back short while a rate limit held some of its lane's items back says when
the soonest such limit frees (``Claimed.rate_wait_s``, counted from when the claim began). No
notice announces that moment, so without this a worker would find those items at its next poll
(``WORKER_POLL_INTERVAL_MS``); with it, it claims again then, if that comes before the poll.

Never a busy loop: a rate wake comes at least ``floor_s`` after the claim before it began. The
floor is ``RATE_WAKE_MIN_S`` and doubles (up to the poll) each time a rate wake claims nothing
while the limit's next moment moved on (another worker took the slot first: every worker
waiting on a limit wakes at its moment, and one of them gets it), and falls back once a claim
takes something. A limit faster than one
item per floor hands out what came due meanwhile at each wake. While no limit held anything
back, the claim says nothing and the worker waits for a notice or its poll, as it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# The shortest wait between a claim and a rate wake: at most this many claims a second per
# worker come from rate wakes.
RATE_WAKE_MIN_S = 0.01


class RateWake:
    """When a worker's next claim is due for the items a rate limit held back."""

    def __init__(self, poll_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.poll_s = poll_s
        self.clock = clock
        self.floor_s = RATE_WAKE_MIN_S
        # When (by ``clock``) the soonest limit that held items back frees; None: none did.
        self.due: float | None = None
        # When the last claim began.
        self.claimed_at = float("-inf")

    def claimed(self, began: float, wait_s: float | None, took: bool, rate_woken: bool) -> None:
        """A claim that began at ``began`` (by ``clock``) ``took`` items or none, and said its
        limits free in ``wait_s`` seconds (None: no limit held anything back); ``rate_woken``:
        it was a rate wake's."""
        due = None if wait_s is None else began + wait_s
        if took:
            self.floor_s = RATE_WAKE_MIN_S
        elif rate_woken and (due is None or self.due is None or due > self.due + RATE_WAKE_MIN_S):
            # Another worker took the slot (the limit's next moment is later): back off. Not
            # when the wake came a little early (the same moment again: this clock reads the
            # claim's start before the database does), then the next claim takes it.
            self.floor_s = min(self.floor_s * 2, self.poll_s)
        self.claimed_at, self.due = began, due

    def timeout_s(self) -> tuple[float, bool]:
        """How long to wait for a notice before claiming again, and whether that is a rate
        wake's moment (sooner than the poll)."""
        if self.due is None:
            return self.poll_s, False
        now = self.clock()
        wait_s = max(self.due - now, self.claimed_at + self.floor_s - now, 0.0)
        return (wait_s, True) if wait_s < self.poll_s else (self.poll_s, False)
