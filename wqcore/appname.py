"""Each process names its PostgreSQL connections by role, so ``pg_stat_activity`` tells a worker
from the web and the sweep: ``application_name`` ``workqueue <role> <host>:<pid>``.

Through libpq's ``PGAPPNAME``, which every connection reads when it opens (Django's and the
store's pools alike), set before the first one. A site that names its connections itself (its own
``PGAPPNAME``, or ``application_name`` in a database's ``OPTIONS``) keeps its name."""

from __future__ import annotations

import os
import socket

PREFIX = "workqueue "
# PostgreSQL keeps the first 63 bytes of an application_name.
LONGEST = 63


def name_connections(role: str) -> None:
    """Name the connections this process opens from now on as ``role`` (web, worker, sweep)."""
    current = os.environ.get("PGAPPNAME")
    if current and not current.startswith(PREFIX):
        return
    name = f"{PREFIX}{role} {socket.gethostname()}:{os.getpid()}"
    os.environ["PGAPPNAME"] = name.encode()[:LONGEST].decode(errors="ignore")
