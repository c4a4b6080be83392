"""The lease keeper: renews the lease of every item a worker holds, and fences itself.

Every ``lease_s / 3`` (on the periodic primitive, result-aware: ``Worker._lease_task``) it
renews all held leases in one statement, each renewal bounded by ``timeout_s`` (a timeout is a
failure). An item the statement did not renew is held by someone
else now (``Conflict``): its task is cancelled at once. Any other failure is retried sooner; an
item whose lease has not been renewed for half the lease, by the wall-clock time since its last
success, is cancelled by the worker itself, before another worker could take it over.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from workers.metrics import RENEWALS_FAILED
from workers.outage import Outage
from workqueue.api import Fence

logger = logging.getLogger(__name__)

Renew = Callable[[list[Fence], float], Awaitable[set[uuid.UUID]]]
OnLost = Callable[[uuid.UUID, str], None]

CONFLICT = "conflict"
SELF_FENCED = "renewal_failing"


@dataclass
class _Lease:
    fence: Fence
    last_success: float


class LeaseKeeper:
    def __init__(
        self,
        renew: Renew,
        on_lost: OnLost,
        *,
        lease_s: float,
        timeout_s: float,
        outage: Outage | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._renew = renew
        self._on_lost = on_lost
        self._outage = outage or Outage(clock)
        self.lease_s = lease_s
        self.timeout_s = timeout_s
        self._clock = clock
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
        self._leases[fence.item_id] = _Lease(fence, self._clock())

    def drop(self, item_id: uuid.UUID) -> None:
        self._leases.pop(item_id, None)

    def __len__(self) -> int:
        return len(self._leases)

    async def renew_once(self) -> bool:
        """Renew every held lease once; returns whether the renewal statement succeeded."""
        if not self._leases:
            return True
        snapshot = list(self._leases.values())
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
                logger.warning(
                    "lease_renewal_failed items=%d error=%s", len(snapshot), type(exc).__name__
                )
            for lease in snapshot:
                item_id = lease.fence.item_id
                if item_id in self._leases and now - lease.last_success >= self.lease_s / 2:
                    self.drop(item_id)
                    self._on_lost(item_id, SELF_FENCED)
            return False
        self._outage.ok(started)
        now = self._clock()
        for lease in snapshot:
            item_id = lease.fence.item_id
            if item_id not in self._leases:
                continue  # finished while the statement ran
            if item_id in renewed:
                lease.last_success = now
            else:
                self.drop(item_id)
                self._on_lost(item_id, CONFLICT)
        return True
