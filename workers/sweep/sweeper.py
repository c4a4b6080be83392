"""One sweep pass: every step in order, under the one-sweeper-at-a-time advisory lock."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from tenancy.contexts import AppType, RequestContext, new_request_context
from tenancy.scope import SYSTEM_ALIAS
from workers.sweep import (
    purge_items,
    purge_outbox,
    purge_request_keys,
    purge_sessions,
    read_gauges,
    relay_outbox,
    requeue_stale,
)
from workers.sweep.config import SweepSettings

logger = logging.getLogger(__name__)

# pg_try_advisory_lock key of the sweep: 'wqsweep' as an integer, the same on every host.
LOCK_KEY = int.from_bytes(b"wqsweep", "big")

Step = Callable[[RequestContext, SweepSettings], Any]

# The order matters: stale claims back first (work waiting), the outbox relayed, then the
# purges, and the gauges last, so they show what the pass left.
STEPS: list[tuple[str, Step]] = [
    ("requeue_stale", requeue_stale.run_once),
    ("relay_outbox", relay_outbox.run_once),
    ("purge_outbox", purge_outbox.run_once),
    ("purge_items", purge_items.run_once),
    ("purge_sessions", purge_sessions.run_once),
    ("purge_request_keys", purge_request_keys.run_once),
    ("read_gauges", read_gauges.run_once),
]


@dataclass
class PassResult:
    # step name -> what its run_once returned (absent when it failed)
    results: dict[str, Any] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    took_s: float = 0.0


def _try_lock() -> bool:
    with connections[SYSTEM_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        return bool(cursor.fetchone()[0])


def _unlock() -> None:
    with connections[SYSTEM_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def sweep_once(
    settings: SweepSettings,
    rctx: RequestContext | None = None,
    steps: list[tuple[str, Step]] | None = None,
) -> PassResult | None:
    """Run one pass if no other sweeper is in one; returns what each step did, or None when
    another sweeper held the lock (this pass skipped). A step's failure is logged once and
    the pass goes on. Sync: run it off an event loop."""
    rctx = rctx or new_request_context(AppType.SWEEP)
    if not _try_lock():
        logger.debug("sweep_skipped reason=another_sweeper")
        return None
    started = time.monotonic()
    result = PassResult()
    try:
        for name, step in steps or STEPS:
            try:
                result.results[name] = step(rctx, settings)
            except Exception:
                result.failed.append(name)
                logger.exception("sweep_step_failed step=%s", name)
                # A broken connection must not fail every later step too.
                for conn in connections.all(initialized_only=True):
                    conn.close_if_unusable_or_obsolete()
    finally:
        try:
            _unlock()
        except Exception:
            # The connection broke: PostgreSQL released the lock with the session.
            connections[SYSTEM_ALIAS].close()
    result.took_s = time.monotonic() - started
    return result
