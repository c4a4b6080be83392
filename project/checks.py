"""The reference site's own hint for a database it cannot reach: its embedded server, or the
environment variable to change (the queue's check, ``workqueue.checks``, asks for it)."""

from __future__ import annotations

from django.conf import settings


def unreachable_hint(reason: str) -> str:
    pgdata = getattr(settings, "EMBEDDED_PGDATA", None)
    if pgdata is not None:
        from project.embedded import is_running

        if not is_running(pgdata):
            return (
                f"the embedded PostgreSQL in {pgdata} is not running: start it with "
                "bin/run (or python -m project.embedded start), or set DATABASE_URL"
            )
    return (
        f"cannot reach the database as the everyday login (DATABASE_URL): {reason}; check "
        "DATABASE_URL, run manage.py create_logins, or unset DATABASE_URL to use the embedded "
        "server"
    )
