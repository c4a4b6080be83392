"""Sweep step: relay what the NOTIFY path missed (rows written while no relayer ran)."""

from __future__ import annotations

from outbox.api import RelayResult, relay_all
from tenancy.contexts import RequestContext
from workers.sweep.config import SweepSettings


def run_once(rctx: RequestContext, settings: SweepSettings) -> RelayResult:
    return relay_all(rctx, batch=min(settings.batch, 500), max_batches=settings.max_batches)
