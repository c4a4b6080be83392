"""Sweep step: hand back the items whose lease passed (a worker died or stalled holding them).

Finds the tenants holding stale claims in one read across tenants, then requeues each tenant's
under that tenant's service context (row-level security applies); an item whose attempts are
spent is dead-lettered instead, and one someone asked to cancel ends cancelled, each with its
audit entry. Each expired attempt raises the signals (``work_failed``, then ``work_retried`` or
``work_dead_lettered``: workqueue/signals.py) once its tenant's statement has committed.
"""

from __future__ import annotations

from tenancy.contexts import RequestContext, service_context
from workers.sweep.config import SweepSettings
from workqueue import runtime


def run_once(rctx: RequestContext, settings: SweepSettings) -> runtime.Requeued:
    requeued = dead = cancelled = 0
    for org_id in runtime.stale_tenants(limit=settings.batch):
        ctx = service_context(rctx, org_id)
        for _ in range(settings.max_batches):
            moved = runtime.requeue_stale(ctx, limit=settings.batch)
            for item in moved.items:
                runtime.send_settled(item, item.last_error, None, "")
            requeued, dead = requeued + moved.requeued, dead + moved.dead_lettered
            cancelled += moved.cancelled
            if moved.requeued + moved.dead_lettered + moved.cancelled < settings.batch:
                break  # a short batch: this tenant has no more stale claims
    return runtime.Requeued(requeued=requeued, dead_lettered=dead, cancelled=cancelled)
