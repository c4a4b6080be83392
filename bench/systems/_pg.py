"""psycopg 3 helpers shared by adapters (psycopg is in both the bench and product venvs)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def connect(dsn: str, autocommit: bool = True) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=autocommit)


def database_url(url: str, name: str) -> str:
    """``url`` pointed at the database ``name`` (same server, login and options)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


def fresh_database(admin_url: str, name: str) -> str:
    """Drop (whoever is connected) and create the database ``name``; its URL."""
    drop_database(admin_url, name)
    with connect(admin_url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return database_url(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    with connect(admin_url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def scalar(dsn: str, query: str, params: Any = None) -> Any:
    with connect(dsn) as conn:
        row = conn.execute(query, params).fetchone()
        return None if row is None else row[0]


def settle(dsn: str) -> None:
    """VACUUM ANALYZE + CHECKPOINT after an (untimed) fill.

    Every system gets the same treatment so that neither a pending autovacuum/analyze
    nor a checkpoint of the fill's dirty pages lands inside the timed part.
    """
    with connect(dsn) as conn:
        conn.execute("VACUUM (ANALYZE)")
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            pass  # non-superuser: checkpoint is only a noise reducer


def vacuum(dsn: str, table: str | None = None) -> None:
    with connect(dsn) as conn:
        if table:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
        else:
            conn.execute("VACUUM (ANALYZE)")
