"""Table grants for the everyday and system logins, applied after every migrate."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from django.db import connections
from psycopg import sql

GRANTS_SQL = Path(__file__).with_name("sql") / "grants.sql"


def apply_grants(using: str = "admin", **_: Any) -> None:
    """Grant the logins named by the ``default`` and ``system`` aliases what they may do.

    Runs as the owner (the alias that migrated); a migrate on another alias grants nothing,
    since only the owner may grant.
    """
    if using != "admin":
        return
    names = {
        key: unquote(connections[alias].settings_dict["USER"])
        for key, alias in (("app", "default"), ("system", "system"))
    }
    text = GRANTS_SQL.read_text()
    statement = sql.SQL(text).format(**{k: sql.Identifier(v) for k, v in names.items()})
    with connections[using].cursor() as cursor:
        cursor.execute(statement.as_string())
