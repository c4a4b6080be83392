"""Liveness: a heartbeat in memory (what /healthz answers from) and its best-effort publication.

The beat lives in the process; the published row (``workqueue_workers_worker``) is for operators. A
failed publish is logged and counted, never raised: the queue and its leases live in the
database, so a worker that cannot publish its heartbeat keeps claiming.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from django.db import connections

from tenancy.contexts import release
from workers.metrics import LIVENESS_PUBLISH_FAILED
from wqcore.conf import system_alias
from wqcore.statements import Statement

logger = logging.getLogger(__name__)

# publish_liveness: upsert this worker's row, stamped by the database's clock; a drain or a
# stop an operator asked for (the row's state set to 'draining' or 'stopping':
# workers/sql/ask_worker.sql) is kept and read back, so the worker learns of it at its next
# beat without a statement of its own. Only going offline ends a stop.
_PUBLISH = """
INSERT INTO workqueue_workers_worker AS w
       (id, kind, lane, host, pid, started_at, last_beat_at, state, version)
VALUES (%(id)s, %(kind)s, %(lane)s, %(host)s, %(pid)s, now(), now(), %(state)s, %(version)s)
ON CONFLICT (id) DO UPDATE SET last_beat_at = now(), version = EXCLUDED.version,
       state = CASE WHEN w.state = 'draining' AND EXCLUDED.state = 'running' THEN w.state
                    WHEN w.state = 'stopping' AND EXCLUDED.state <> 'offline' THEN w.state
                    ELSE EXCLUDED.state END
RETURNING w.state
"""


class Liveness:
    def __init__(
        self,
        worker_id: str,
        kind: str,
        lane: str,
        *,
        stale_after_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.worker_id = worker_id
        self.kind = kind
        self.lane = lane
        self.stale_after_s = stale_after_s
        self._clock = clock
        self.last_beat: float | None = None
        self.last_error: Exception | None = None
        self.state = "running"
        # An operator asked this worker to drain, or to stop now (read back by a publish).
        self.drain_requested = False
        self.stop_requested = False

    def beat(self) -> None:
        self.last_beat = self._clock()

    def healthy(self) -> bool:
        return self.last_beat is not None and self._clock() - self.last_beat < self.stale_after_s

    def age_s(self) -> float | None:
        return None if self.last_beat is None else self._clock() - self.last_beat

    def publish(self) -> bool:
        """Write this worker's row (sync; run it off the event loop). False when it failed.

        On the system login: a worker's row belongs to no tenant (it serves them all), and the
        everyday login has no right on the workers table.
        """
        try:
            with connections[system_alias()].cursor() as cursor:
                cursor.execute(
                    _PUBLISH,
                    {
                        "id": self.worker_id,
                        "kind": self.kind,
                        "lane": self.lane,
                        "host": socket.gethostname(),
                        "pid": os.getpid(),
                        "state": self.state,
                        "version": release(),
                    },
                )
                (published,) = cursor.fetchone()
            if published == "draining" and self.state == "running":
                self.drain_requested = True
            if published == "stopping":
                self.stop_requested = True
            return True
        except Exception as exc:
            LIVENESS_PUBLISH_FAILED.inc()
            self.last_error = exc
            connections[system_alias()].close_if_unusable_or_obsolete()
            return False


class ReadWorkersParams(NamedTuple):
    stale_after_s: float


# The live workers by state, for the gauges (workers/gauges.py embeds it in its one statement).
READ_WORKERS = Statement(
    "read_workers", ReadWorkersParams, directory=Path(__file__).with_name("sql")
)

# The lanes live workers serve: a lane with due work and none of them is unserved (the gauges
# page flags it; /metrics says it as workqueue_lane_unserved).
READ_LIVE_LANES = Statement(
    "read_live_lanes", ReadWorkersParams, directory=Path(__file__).with_name("sql")
)


# The kinds live workers serve in each lane: a kind with due work in a lane and none of them is
# unserved (/metrics says it as workqueue_kind_unserved; manage.py check warns of it; the gauges
# page lists it).
READ_LIVE_KINDS = Statement(
    "read_live_kinds", ReadWorkersParams, directory=Path(__file__).with_name("sql")
)


def read_live_kind_lanes(stale_after_s: float) -> set[tuple[str, str]]:
    """Each (lane, kind) the live workers serve (read on the system login)."""
    from wqcore.store import System, execute

    rows = execute(System(READ_LIVE_KINDS, ReadWorkersParams(float(stale_after_s))))
    return {(lane, kind) for (lane, kind) in rows.rows}


def read_live_kinds(stale_after_s: float) -> set[str]:
    """The kinds the live workers serve, in any lane (read on the system login)."""
    return {kind for (_lane, kind) in read_live_kind_lanes(stale_after_s)}


def read_live_lanes(stale_after_s: float) -> set[str]:
    """The lanes the live workers serve (rows not offline, beating within ``stale_after_s``).
    The workers table belongs to no tenant: read on the system login."""
    from wqcore.store import System, execute

    rows = execute(System(READ_LIVE_LANES, ReadWorkersParams(float(stale_after_s))))
    return {lane for (lane,) in rows.rows}
