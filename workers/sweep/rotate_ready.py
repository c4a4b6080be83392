"""Sweep step: turn the ready ring once (``workqueue/ready.py``): promote the items coming due,
ring the pending items a release before the ring left without a ready row, and empty the slots
the claims have walked past. Every worker also turns it on its own short timer
(``READY_ROTATE_S``, ``workers/timers.py``); this step is the sweep's turn, so ``manage.py sweep``
alone keeps the ring turning too."""

from __future__ import annotations

from tenancy.contexts import RequestContext
from workers.sweep.config import SweepSettings
from workqueue import runtime


def run_once(rctx: RequestContext, settings: SweepSettings) -> runtime.Rotated:
    return runtime.rotate_ready()
