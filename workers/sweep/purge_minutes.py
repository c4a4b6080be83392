"""Sweep step: delete the gauges page's minutes older than ``ROLLUP_RETENTION_S`` (its charts
draw a day at most), so the rollup keeps a bounded number of rows."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import runtime


def run_once(rctx: RequestContext, settings: SweepSettings) -> int:
    return runtime.purge_minutes(
        db_now_minus(settings.rollup_retention_s),
        batch=settings.batch,
        max_batches=settings.max_batches,
    )
