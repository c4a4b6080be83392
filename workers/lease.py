"""The lease keeper: renews the lease of every item a worker holds, and fences itself.

Every ``lease_s / 3`` (on the periodic primitive, result-aware: ``Worker._lease_task``) it
renews all held leases in one statement, each renewal bounded by ``timeout_s`` (a timeout is a
failure). An item the statement did not renew is held by someone
else now (``Conflict``): its task is cancelled at once. Any other failure is retried sooner; an
item whose lease has not been renewed for half the lease, by the wall-clock time since its last
success, is cancelled by the worker itself, before another worker could take it over. The
same statement reports which renewed items someone asked to cancel (``workqueue/cancel.py``):
each is reported once to ``on_cancel`` and still renewed until its holder ends it.

The renewals run on a thread of their own with its own event loop and connection
(``workers/offloop.py``), not on the loop the handlers run on: an async handler that blocks its
loop (``time.sleep``, a sync driver) must not stop the renewals of everything the process
holds. So ``hold`` and ``drop`` come from the worker's loop while ``renew_once`` runs on the
other thread: the held leases are behind a lock, and ``on_lost`` is called on the renewing
thread (the worker's callback hands the cancellation to its own loop).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from workers.metrics import RENEWALS_FAILED
from workers.outage import Outage
from workqueue.runtime import Fence
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

Renew = Callable[[list[Fence], float], Awaitable[set[uuid.UUID]]]
# Each is told the fence of the claim concerned: the same worker may hold the item again under
# a newer claim by the time a report about the older one arrives.
OnLost = Callable[[Fence, str], None]
OnCancel = Callable[[Fence], None]

CONFLICT = "conflict"
SELF_FENCED = "renewal_failing"


@dataclass
class _Lease:
    fence: Fence
    last_success: float
    # Whether a renewal reported a cancel request for it (reported once to ``on_cancel``).
    cancel_reported: bool = False


class LeaseKeeper:
    def __init__(
        self,
        renew: Renew,
        on_lost: OnLost,
        *,
        on_cancel: OnCancel | None = None,
        lease_s: float,
        timeout_s: float,
        outage: Outage | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._renew = renew
        self._on_lost = on_lost
        self._on_cancel = on_cancel
        self._outage = outage or Outage(clock)
        self.lease_s = lease_s
        self.timeout_s = timeout_s
        self._clock = clock
        # Held from the worker's loop, renewed from the keeper's thread.
        self._lock = threading.Lock()
        self._leases: dict[uuid.UUID, _Lease] = {}

    @property
    def interval_s(self) -> float:
        return self.lease_s / 3

    @property
    def retry_s(self) -> float:
        """After a failure, retry sooner than the interval: half the lease is the whole budget."""
        return max(self.lease_s / 12, 0.05)

    def hold(self, fence: Fence) -> None:
        """Start keeping ``fence``'s lease; its claim just set it, so that counts as a success."""
        lease = _Lease(fence, self._clock())
        with self._lock:
            self._leases[fence.item_id] = lease

    def drop(self, fence: Fence) -> None:
        """Stop keeping ``fence``'s lease; a newer claim's lease of the same item is kept."""
        with self._lock:
            lease = self._leases.get(fence.item_id)
            if lease is not None and lease.fence == fence:
                del self._leases[fence.item_id]

    def drop_all(self) -> None:
        """Stop keeping every lease (the worker fenced itself): a renewal already on its way
        may still extend them once; their items are the sweep's to hand back."""
        with self._lock:
            self._leases.clear()

    def __len__(self) -> int:
        return len(self._leases)

    async def renew_once(self) -> bool:
        """Renew every held lease once; returns whether the renewal statement succeeded."""
        with self._lock:
            snapshot = list(self._leases.values())
        if not snapshot:
            return True
        started = self._outage.now()
        try:
            renewed = await asyncio.wait_for(
                self._renew([lease.fence for lease in snapshot], self.lease_s), self.timeout_s
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a timeout or a database error: retried, then self-fenced
            RENEWALS_FAILED.inc()
            now = self._clock()
            if not self._outage.failed("lease", exc):
                log_event(
                    logger,
                    logging.WARNING,
                    "lease_renewal_failed",
                    items=len(snapshot),
                    error=type(exc).__name__,
                )
            self._lose(
                [lease for lease in snapshot if now - lease.last_success >= self.lease_s / 2],
                SELF_FENCED,
            )
            return False
        self._outage.ok(started)
        now = self._clock()
        for lease in snapshot:
            if lease.fence.item_id in renewed:
                lease.last_success = now
        self._lose([lease for lease in snapshot if lease.fence.item_id not in renewed], CONFLICT)
        asked = getattr(renewed, "cancel_requested", ())
        if asked:
            self._report_cancels([lease for lease in snapshot if lease.fence.item_id in asked])
        return True

    def _report_cancels(self, leases: list[_Lease]) -> None:
        """Tell the worker, once per lease still held, that someone asked to cancel it; the
        lease is still kept (renewed) until the holder's fenced cancel ends it."""
        if self._on_cancel is None:
            return
        asked = []
        with self._lock:
            for lease in leases:
                if self._leases.get(lease.fence.item_id) is lease and not lease.cancel_reported:
                    lease.cancel_reported = True
                    asked.append(lease.fence)
        for fence in asked:
            self._on_cancel(fence)

    def _lose(self, leases: list[_Lease], reason: str) -> None:
        """Stop keeping these leases and report each lost, unless it ended meanwhile: an item
        that finished while the statement ran, or was claimed again under a new token, is no
        longer the lease that was renewed (``is``, not the id)."""
        lost = []
        with self._lock:
            for lease in leases:
                item_id = lease.fence.item_id
                if self._leases.get(item_id) is lease:
                    del self._leases[item_id]
                    lost.append(lease.fence)
        for fence in lost:
            self._on_lost(fence, reason)
