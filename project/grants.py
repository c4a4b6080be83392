"""Table grants for the everyday and system logins, applied after every migrate.

``project/sql/grants.sql`` takes every right away and grants the system login; then each
installed app's ``sql/grants.sql`` grants the everyday login what that app's tables need, so
the narrowest grant lives beside the tables it is for, and a table no app grants stays closed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from django.apps import apps
from django.db import connections
from psycopg import sql

GRANTS_SQL = Path(__file__).with_name("sql") / "grants.sql"


def grant_files() -> list[Path]:
    """The project's grants first, then each app's, in INSTALLED_APPS order."""
    files = [GRANTS_SQL]
    for config in apps.get_app_configs():
        path = Path(config.path) / "sql" / "grants.sql"
        if path.is_file() and path != GRANTS_SQL:
            files.append(path)
    return files


def apply_grants(using: str = "admin", **_: Any) -> None:
    """Grant the logins named by the ``default`` and ``system`` aliases what they may do.

    Runs as the owner (the alias that migrated); a migrate on another alias grants nothing,
    since only the owner may grant.
    """
    if using != "admin":
        return
    names = {
        key: sql.Identifier(unquote(connections[alias].settings_dict["USER"]))
        for key, alias in (("app", "default"), ("system", "system"))
    }
    with connections[using].cursor() as cursor:
        for path in grant_files():
            cursor.execute(sql.SQL(path.read_text()).format(**names).as_string())
