"""gunicorn's settings for the web (the image's command; gunicorn reads ./gunicorn.conf.py).

Several processes answer ``/metrics`` in turn, so each keeps its samples in files of one
folder (prometheus_client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``) and whichever
answers a scrape sums them all: a counter never goes backwards from one scrape to the next.
The folder is emptied when the server starts (a new server's counters start at zero, as
Prometheus expects of a restart) and a process that exits is marked dead (its live gauges
leave; its counters stay in the sums).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

# Before prometheus_client is imported anywhere: it picks its storage when first imported.
# Unset: a fresh folder of this server's own.
MULTIPROC_DIR = Path(
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="workqueue-metrics-"))
)
# Imported here, not in child_exit: that hook runs in the master's SIGCHLD handler, and a
# second process exiting during the first one's import found the module half-imported.
from prometheus_client import multiprocess  # noqa: E402

bind = f"0.0.0.0:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))


def on_starting(server: Any) -> None:
    MULTIPROC_DIR.mkdir(parents=True, exist_ok=True)
    for stale in MULTIPROC_DIR.glob("*.db"):
        stale.unlink()


def child_exit(server: Any, worker: Any) -> None:
    multiprocess.mark_process_dead(worker.pid)


# gunicorn's own lines (``gunicorn.error``) and its access lines (``gunicorn.access``, one
# ``http_request`` event each) go through the queue's formatter, as text or as JSON
# (``LOG_FORMAT``), like every other line of the site.
from project.gunicorn_logs import logconfig_dict  # noqa: E402, F401
