"""Sweep step: delete the enqueue API's stored Idempotency-Key answers older than
``WORKQUEUE["IDEMPOTENCY_KEY_RETENTION_S"]`` (a retry after that is answered anew)."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import runtime
from wqcore.conf import wq_settings


def run_once(rctx: RequestContext, settings: SweepSettings) -> int:
    retention_s = wq_settings.IDEMPOTENCY_KEY_RETENTION_S
    before = db_now_minus(retention_s)
    return runtime.purge_request_keys(
        rctx, before, batch=settings.batch, max_batches=settings.max_batches
    )
