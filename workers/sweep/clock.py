"""The database's clock for the sweep: retentions are counted by ``now()``, never a worker's."""

from __future__ import annotations

from datetime import datetime

from django.db import connections

from wqcore.conf import system_alias


def db_now_minus(seconds: float) -> datetime:
    """The database's ``now()`` less ``seconds``."""
    with connections[system_alias()].cursor() as cursor:
        cursor.execute("SELECT now() - make_interval(secs => %s)", [float(seconds)])
        moment: datetime = cursor.fetchone()[0]
        return moment
