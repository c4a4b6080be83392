"""Sweep step: delete expired Django sessions, when the site asks (``SWEEP_PURGE_SESSIONS``:
the sessions table is the site's, not the queue's)."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from tenancy.sessions import purge_expired_sessions
from workers.sweep.config import SweepSettings


def run_once(rctx: RequestContext, settings: SweepSettings) -> int:
    if not settings.purge_sessions:
        return 0
    return purge_expired_sessions(batch=settings.batch, max_batches=settings.max_batches)
