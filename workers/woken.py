"""The woken claim, sent from the listener's thread: the shortest path from a notice to a handler.

While the claim loop waits idle (its last claim found less than it asked), it offers the
listener one slot (``offer``). A notice for the lane that finds an offer standing takes it: the
listener's thread claims the first due item at once, on its own connection (``claim_first``:
the ``claim_one`` statement, prepared and planned generically, outside Django's cursor wrapper:
``wqcore.own_connection``), and hands what it took to the
worker's loop in one ``call_soon_threadsafe``, where the item starts before anything else runs
(``deliver``). Off the path: the notice's hop to the loop, the loop's pass to the claim, and the
async driver's two waits (about 0.2 ms of a 1 ms wake: bench/RESULTS.md). A notice that finds
no offer (the loop is claiming, or has no free slot) wakes the loop, as before.

The loop withdraws its offer when its wait ends otherwise (its poll, a rate limit's moment, the
stop). An offer the thread took already is awaited, never dropped: a claim that committed must
start what it took, or hand it back (the liveness lock it was offered under is gone). The
thread's claim is begun with the offer, up to its statement (``plans.begin``), so on a notice
only the statement goes. Where a cap the loop knows of is in effect, the claim decides without
a statement and no offer is made; where the statement finds a rate limit or a tenant's cap,
the thread declines (``None``). Either way the loop's own woken claim, which counts them,
claims next.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from workqueue import runtime
from wqcore.store import OwnConnection, Plan, Step


@dataclass(eq=False)
class Offer:
    """One slot the idle claim loop offers, under the liveness lock it holds (``epoch``), with
    the thread's claim begun with it (off the path from the notice): its plan, run up to its
    statement (``first``), with the claim's fresh context; on a notice only that statement
    goes. ``done`` receives what the thread's claim took (``runtime.Claimed``), None when it
    declined, or the error it met; ``started``: whether ``deliver`` started the items."""

    loop: asyncio.AbstractEventLoop
    epoch: int
    plan: Plan[runtime.Claimed | None]
    first: Step
    done: asyncio.Future[runtime.Claimed | BaseException | None] = field(init=False)
    # When the claim was sent, by the outage account's clock and the rate wake's.
    sent_at: tuple[float, float] = (0.0, 0.0)
    started: bool = False

    def __post_init__(self) -> None:
        self.done = self.loop.create_future()


class WokenClaims:
    """The offer standing (one at most) and the claim the listener's thread sends on it.

    ``claim(offer, connection)`` runs on the thread, on ``connection``; ``clocks()`` says when
    it was sent; ``deliver(offer, result)`` runs on the loop, then ``offer.done`` is set."""

    def __init__(
        self,
        claim: Callable[[Offer, OwnConnection], runtime.Claimed | None],
        clocks: Callable[[], tuple[float, float]],
        deliver: Callable[[Offer, runtime.Claimed | BaseException | None], None],
    ) -> None:
        self._claim = claim
        # The thread's connection (one: the thread sends one claim at a time).
        self.connection = OwnConnection()
        self._clocks = clocks
        self._deliver = deliver
        self._lock = threading.Lock()
        self._offer: Offer | None = None

    @property
    def standing(self) -> bool:
        """Whether an offer stands now (the loop waits idle for a notice)."""
        return self._offer is not None

    def offer(self, offer: Offer) -> None:
        with self._lock:
            self._offer = offer

    def withdraw(self, offer: Offer) -> bool:
        """True when ``offer`` was still standing (now withdrawn); False: the thread took it,
        and ``offer.done`` will say what came of it."""
        with self._lock:
            if self._offer is not offer:
                return False
            self._offer = None
            return True

    def claim_on_notice(self) -> bool:
        """On the listener's thread, for a notice of the lane: claim on the offer standing and
        deliver; False when none stands (the caller wakes the loop instead)."""
        with self._lock:
            offer, self._offer = self._offer, None
        if offer is None:
            return False
        result: runtime.Claimed | BaseException | None
        try:
            offer.sent_at = self._clocks()
            result = self._claim(offer, self.connection)
        except Exception as exc:
            result = exc
        offer.loop.call_soon_threadsafe(self._finish, offer, result)
        # Ready for the next notice, once this claim is on its way to the loop.
        self.prepare()
        return True

    def prepare(self) -> None:
        """On the thread, off the path from a notice (once it listens, and after each claim):
        connect the claim's connection if it is not. A failure here is left to the claim,
        which meets it again and reports it."""
        try:
            self.connection.open()
        except Exception:  # the claim meets it again, and reports it
            pass

    def close(self) -> None:
        """On the thread, as it ends."""
        self.connection.close()

    def _finish(self, offer: Offer, result: runtime.Claimed | BaseException | None) -> None:
        try:
            self._deliver(offer, result)
        finally:
            offer.done.set_result(result)
