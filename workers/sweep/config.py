"""The sweep's settings: a view of the ``SWEEP_*`` and retention names of ``WORKQUEUE`` (their
defaults, bounds and meanings in ``wqcore/conf.py``).

Every name carries its unit. Retentions are counted by the database's clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from wqcore.confview import View, setting


@dataclass(frozen=True)
class SweepSettings(View):
    """The values in effect unless given (a test's), each checked by its definition: one line
    naming every wrong one."""

    interval_s: float = setting("SWEEP_INTERVAL_S")
    # The rescue (workers/sweep/rescue.py) also runs alone this often (0: only in each pass), and
    # hands back a gone worker's items once its lock has been seen free this long.
    rescue_interval_s: float = setting("SWEEP_RESCUE_INTERVAL_S")
    rescue_grace_s: float = setting("SWEEP_RESCUE_GRACE_S")
    # A pass that takes longer is abandoned (its thread finishes the statement it is in).
    timeout_s: float = setting("SWEEP_TIMEOUT_S")
    batch: int = setting("SWEEP_BATCH")
    max_batches: int = setting("SWEEP_MAX_BATCHES")
    # Failed items (dead letters) are kept longer than done ones, so triage has time.
    item_retention_s: float = setting("ITEM_RETENTION_S")
    dead_letter_retention_s: float = setting("DEAD_LETTER_RETENTION_S")
    # Done items move to history (workqueue/history.py) this long after they ended.
    history: bool = setting("HISTORY")
    history_after_s: float = setting("HISTORY_AFTER_S")
    history_span_s: float = setting("HISTORY_SPAN_S")
    outbox_retention_s: float = setting("OUTBOX_RETENTION_S")
    # The gauges page's minutes: attempts counted per statement, and how long the rows stay.
    rollup_batch: int = setting("ROLLUP_BATCH")
    rollup_retention_s: float = setting("ROLLUP_RETENTION_S")
    purge_sessions: bool = setting("SWEEP_PURGE_SESSIONS")
