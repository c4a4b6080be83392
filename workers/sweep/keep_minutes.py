"""Sweep step: the gauges page's minutes, one partition a day (``workqueue/minutes.py``): the
days ahead made, and each day past ``ROLLUP_RETENTION_S`` dropped whole (its charts draw a day
at most), so the rollup keeps a bounded number of rows and deletes none. Runs before the
rollup, so the day a minute falls in exists when it is written."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from workers.sweep.config import SweepSettings
from workqueue import runtime


def run_once(rctx: RequestContext, settings: SweepSettings) -> runtime.KeptMinutes:
    return runtime.keep_minutes(settings.rollup_retention_s)
