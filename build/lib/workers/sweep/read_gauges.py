"""Sweep step: read the queue's gauges afresh, so the next scrape of /metrics finds them
current without reading the database itself."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from workers.gauges import GAUGES, QueueGauges
from workers.sweep.config import SweepSettings


def run_once(rctx: RequestContext, settings: SweepSettings) -> QueueGauges:
    GAUGES.forget()
    return GAUGES.get()
