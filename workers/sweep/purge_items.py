"""Sweep step: delete done items older than ``ITEM_RETENTION_S``, and dead letters and items
discarded or cancelled older than ``DEAD_LETTER_RETENTION_S`` (kept longer, so triage has time
and the audit trail's subject still exists while someone may look). The first purge that deletes
anything with autovacuum off logs a warning: the deleted rows' space and index entries then
stay until someone runs VACUUM, and every claim walks over them."""

from __future__ import annotations

import logging
from typing import NamedTuple

from tenancy.contexts import RequestContext
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import runtime
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

# Whether this process has looked at the autovacuum setting (once per process is enough: the
# warning is for the operator reading the log, not a state to track).
_autovacuum = {"checked": False}


class Purged(NamedTuple):
    done: int
    failed: int


def run_once(rctx: RequestContext, settings: SweepSettings) -> Purged:
    bounds = {"batch": settings.batch, "max_batches": settings.max_batches}
    done = runtime.purge_items(
        rctx, db_now_minus(settings.item_retention_s), statuses=(runtime.Status.DONE,), **bounds
    )
    failed = runtime.purge_items(
        rctx,
        db_now_minus(settings.dead_letter_retention_s),
        statuses=(runtime.Status.FAILED, runtime.Status.DISCARDED, runtime.Status.CANCELLED),
        **bounds,
    )
    if (done or failed) and not _autovacuum["checked"]:
        _autovacuum["checked"] = True
        if not runtime.autovacuum_on():
            log_event(
                logger,
                logging.WARNING,
                "autovacuum_off",
                table="workqueue_workitem",
                hint="turn autovacuum on (the table's own settings vacuum it after 1% of its rows "
                "died), or run VACUUM workqueue_workitem on a schedule as its owner: purged "
                "items' space and index entries stay until a vacuum, and claims slow down",
            )
    return Purged(done, failed)
