"""A module declaring a schedule that cannot work (``BAD_SCHEDULE`` in the environment says
which way), for the test that a process refuses to start on it in one line."""

from __future__ import annotations

import os
from datetime import timedelta

from workers.schedules import Schedule, register_schedule

BAD = {
    "cron": {"kind": "NOOP", "cron": "61 * * * *"},
    "every": {"kind": "NOOP", "every": timedelta(0)},
    "kind": {"kind": "NO_SUCH_KIND", "every": timedelta(minutes=1), "tenant": "each"},
}

register_schedule(Schedule("bad-one", **BAD[os.environ["BAD_SCHEDULE"]]))  # type: ignore[arg-type]
