"""The database's clock for the sweep: retentions are counted by ``now()``, never a worker's."""

from __future__ import annotations

from datetime import datetime

from django.db import connections

from tenancy.scope import SYSTEM_ALIAS


def db_now_minus(seconds: float) -> datetime:
    """The database's ``now()`` less ``seconds``."""
    with connections[SYSTEM_ALIAS].cursor() as cursor:
        cursor.execute("SELECT now() - make_interval(secs => %s)", [float(seconds)])
        return cursor.fetchone()[0]
