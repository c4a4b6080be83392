"""The database as the owner, through faults: a statement retried while the server is away (a
cut, a restart, a failover), for the fault suites' own reads."""

from __future__ import annotations

import time
from typing import Any

from django.db import connections
from django.db.utils import InterfaceError, OperationalError

# What a statement meets while the server is away.
DOWN = (OperationalError, InterfaceError)


def query(sql: str, params: Any = None, timeout_s: float = 60.0) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` as the owner, reconnecting while the server is away."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with connections["admin"].cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchall() if cursor.description else []
        except DOWN:
            connections["admin"].close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
