"""Sweep step: delete the enqueue API's stored Idempotency-Key answers older than
``IDEMPOTENCY_KEY_RETENTION_S`` (a retry after that is answered anew)."""

from __future__ import annotations

from django.conf import settings as django_settings

from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import api


def run_once(rctx: RequestContext, settings: SweepSettings) -> int:
    retention_s = float(getattr(django_settings, "IDEMPOTENCY_KEY_RETENTION_S", 24 * 3600))
    before = db_now_minus(retention_s)
    return api.purge_request_keys(
        rctx, before, batch=settings.batch, max_batches=settings.max_batches
    )
