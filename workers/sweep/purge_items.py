"""Sweep step: delete done items older than ``ITEM_RETENTION_S``, and dead letters and items an
operator discarded older than ``DEAD_LETTER_RETENTION_S`` (kept longer, so triage has time and
the audit trail's subject still exists while someone may look)."""

from __future__ import annotations

from typing import NamedTuple

from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import api


class Purged(NamedTuple):
    done: int
    failed: int


def run_once(rctx: RequestContext, settings: SweepSettings) -> Purged:
    bounds = {"batch": settings.batch, "max_batches": settings.max_batches}
    done = api.purge_items(
        rctx, db_now_minus(settings.item_retention_s), statuses=(api.Status.DONE,), **bounds
    )
    failed = api.purge_items(
        rctx,
        db_now_minus(settings.dead_letter_retention_s),
        statuses=(api.Status.FAILED, api.Status.DISCARDED),
        **bounds,
    )
    return Purged(done, failed)
