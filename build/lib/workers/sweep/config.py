"""The sweep's settings: the ``SWEEP_*`` and retention names of ``WORKQUEUE`` (defaults in
``wqcore/conf.py``), validated in one line.

Every name carries its unit. Retentions are counted by the database's clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from wqcore.conf import wq_settings

DAY_S = 86_400.0


@dataclass(frozen=True)
class SweepSettings:
    # Seconds between the end of one pass and the start of the next.
    interval_s: float = 5.0
    # A pass that takes longer is abandoned (its thread finishes the statement it is in).
    timeout_s: float = 120.0
    # The most rows one statement of a step touches, and the most statements per step.
    batch: int = 1000
    max_batches: int = 20
    # Done items are purged after this; failed items (dead letters) after the longer
    # DEAD_LETTER_RETENTION_S, so triage has time.
    item_retention_s: float = 7 * DAY_S
    dead_letter_retention_s: float = 30 * DAY_S
    # Relayed outbox rows are purged after this.
    outbox_retention_s: float = 1 * DAY_S
    # Expired Django sessions are purged too: the site's own table, so only when it asks.
    purge_sessions: bool = False

    # field -> its WORKQUEUE name (the retentions are named without the SWEEP_ prefix).
    ENV = {
        "interval_s": "SWEEP_INTERVAL_S",
        "timeout_s": "SWEEP_TIMEOUT_S",
        "batch": "SWEEP_BATCH",
        "max_batches": "SWEEP_MAX_BATCHES",
        "item_retention_s": "ITEM_RETENTION_S",
        "dead_letter_retention_s": "DEAD_LETTER_RETENTION_S",
        "outbox_retention_s": "OUTBOX_RETENTION_S",
        "purge_sessions": "SWEEP_PURGE_SESSIONS",
    }

    @classmethod
    def from_settings(cls) -> SweepSettings:
        """The sweep's settings as ``WORKQUEUE`` names them (``ENV``: field -> name)."""
        values = {
            field.name: getattr(wq_settings, cls.ENV[field.name])
            for field in dataclasses.fields(cls)
        }
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """One line naming every wrong setting."""
        problems = []
        for name in ("interval_s", "timeout_s", "batch", "max_batches"):
            if not getattr(self, name) > 0:
                problems.append(f"{self.ENV[name]} must be above 0 (got {getattr(self, name)})")
        for name in ("item_retention_s", "dead_letter_retention_s", "outbox_retention_s"):
            if getattr(self, name) < 0:
                problems.append(f"{self.ENV[name]} must be 0 or more (got {getattr(self, name)})")
        if problems:
            raise ImproperlyConfigured("; ".join(problems))
