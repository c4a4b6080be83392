"""Sweep step: delete expired Django sessions (they live in the database here)."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from tenancy.sessions import purge_expired_sessions
from workers.sweep.config import SweepSettings


def run_once(rctx: RequestContext, settings: SweepSettings) -> int:
    return purge_expired_sessions(batch=settings.batch, max_batches=settings.max_batches)
