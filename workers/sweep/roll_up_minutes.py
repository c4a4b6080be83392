"""Sweep step: count the attempts that ended since the last pass into the gauges page's minutes
(per tenant, lane and minute: done, failed, dead letters, waits), and once a minute each lane's
pending items; the page's charts draw them (``workqueue/minutes.py``). It reads the attempts
the settle statements wrote, so the drain pays nothing for it."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from workers.sweep.config import SweepSettings
from workqueue import runtime


def run_once(rctx: RequestContext, settings: SweepSettings) -> runtime.RolledUp:
    return runtime.roll_up_minutes(
        batch=settings.rollup_batch,
        max_batches=settings.max_batches,
        retention_s=settings.rollup_retention_s,
    )
