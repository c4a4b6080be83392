"""Sweep step: delete the rate limits' buckets idle for a whole burst (full again, the same as
none) and those of a limit no longer set, so the table holds the keys active lately."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from workers.sweep.config import SweepSettings
from workqueue import runtime


def run_once(rctx: RequestContext, settings: SweepSettings) -> int:
    return runtime.purge_rate_buckets(batch=settings.batch, max_batches=settings.max_batches)
