"""Sweep step: delete relayed outbox rows older than ``OUTBOX_RETENTION_S``."""

from __future__ import annotations

from outbox.api import purge_relayed
from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings


def run_once(rctx: RequestContext, settings: SweepSettings) -> int:
    before = db_now_minus(settings.outbox_retention_s)
    return purge_relayed(rctx, before, batch=settings.batch, max_batches=settings.max_batches)
