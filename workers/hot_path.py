"""The worker's hot statements, run on the event loop over its own async connections.

The claim, the batch completion and the lease renewal run for every item, so they skip the
thread hop a Django call costs (a woken worker starts its item sooner) and run as prepared
statements with binary results. They are the same named statements (``workqueue/sql``) and the
same tenancy query the sync API runs; only the driver differs. Each runs on the system login,
for the reasons ``workqueue.claim.claim`` and ``workqueue.settle.complete_many`` give.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from django.db import connections

from tenancy.contexts import OpContext, RequestContext
from tenancy.scope import SYSTEM_ALIAS
from workqueue.claim import ORPHAN_ERROR, claim_params, count_orphan, hand_out
from workqueue.db import load_sql
from workqueue.models import WorkItem
from workqueue.settle import Held, held_columns

logger = logging.getLogger(__name__)


class Line:
    """One async connection on the system login, reconnected after it breaks."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._lock = asyncio.Lock()

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            params = connections[SYSTEM_ALIAS].get_connection_params()
            for django_only in ("cursor_factory", "context"):
                params.pop(django_only, None)
            params["prepare_threshold"] = 2
            conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
            # UTC like Django's connections; plans made for each run's real arguments (a
            # generic plan for an array of unknown length can join the whole table).
            await conn.execute("SET TIME ZONE 'UTC'; SET plan_cache_mode = force_custom_plan")
            self._conn = conn
        return self._conn

    async def fetch(self, sql: str, params: dict[str, Any]) -> tuple[list[str], list[Any]]:
        """Run one statement; returns its column names and rows."""
        async with self._lock:  # one statement at a time on a connection
            conn = await self._connection()
            try:
                cursor = conn.cursor(binary=True)
                await cursor.execute(sql, params)
                names = [col.name for col in cursor.description or ()]
                return names, await cursor.fetchall() if cursor.description else []
            except (psycopg.OperationalError, psycopg.InterfaceError):
                await conn.close()
                raise
            except asyncio.CancelledError:
                # A statement cut off mid-flight leaves the connection busy: start afresh.
                await conn.close()
                raise

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()


class HotPath:
    def __init__(self) -> None:
        self.claim_line = Line("claim")
        self.settle_line = Line("settle")
        self.lease_line = Line("lease")

    async def claim(
        self,
        rctx: RequestContext,
        lane: str,
        kinds: Sequence[str] | None,
        worker_id: str,
        lease_s: float,
        limit: int,
    ) -> tuple[list[tuple[OpContext, WorkItem]], list[WorkItem]]:
        """``workqueue.claim.claim`` on the loop: the claimed pairs, and the orphans (items
        whose tenant is gone) for the caller to fail."""
        params = claim_params(lane, kinds, worker_id, lease_s, limit)
        names, rows = await self.claim_line.fetch(load_sql("claim"), params)
        return hand_out(rctx, names, rows) if rows else ([], [])

    async def fail_orphans(self, orphans: list[WorkItem]) -> None:
        for item in orphans:
            params = {"id": item.id, "claim_token": item.claim_token, "error": ORPHAN_ERROR}
            await self.settle_line.fetch(load_sql("dead_letter"), params)
            count_orphan(item)

    async def complete_many(self, held: list[Held]) -> set[uuid.UUID]:
        """``workqueue.settle.complete_many`` on the loop: the ids completed."""
        _, rows = await self.settle_line.fetch(load_sql("complete_many"), held_columns(held))
        return {row[0] for row in rows}

    async def extend_leases(self, held: list[Held], lease_s: float) -> set[uuid.UUID]:
        """``workqueue.settle.extend_leases`` on the loop: the ids renewed."""
        params = {**held_columns(held), "lease_s": float(lease_s)}
        _, rows = await self.lease_line.fetch(load_sql("extend_leases"), params)
        return {row[0] for row in rows}

    async def close(self) -> None:
        for line in (self.claim_line, self.settle_line, self.lease_line):
            await line.close()
