"""Create the everyday and system logins and their grants, idempotently, as the owner.

Roles are cluster-wide and the database may not exist yet, so this connects to the server's
``postgres`` database with the owner's credentials, not through Django.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg import sql

if TYPE_CHECKING:
    from project.database import DatabaseUrls

logger = logging.getLogger(__name__)

# What every session of the two logins starts with, set on the logins (ALTER ROLE ... SET), so
# the server applies it at each login: through a transaction pooler too, where a setting sent
# at connect (a startup option, which PgBouncer refuses anyway) or by SET would hold on one
# server connection and not on the next transaction's, and would leak to the other clients
# of the first.
LOGIN_SETTINGS = (
    # No JIT: PostgreSQL compiles a statement whose estimated cost passes jit_above_cost, on
    # every run. The fair claim's estimates over a million waiting items passed it, and
    # compiling took 30 ms of a 31 ms claim; a queue's statements are short, none gains.
    ("jit", "off"),
    # Django's connections run in UTC (USE_TZ); a session that starts in it needs no SET TIME
    # ZONE at connect (Django and the store's pools send one only when the server reports
    # another zone).
    ("timezone", "UTC"),
)


def _user_password(url: str) -> tuple[str, str | None]:
    parts = urlsplit(url)
    if not parts.username:
        raise ImproperlyConfigured(f"the URL {url!r} names no login: add user@ before the host")
    return unquote(parts.username), unquote(parts.password) if parts.password else None


def _database(url: str) -> str:
    return unquote(urlsplit(url).path.lstrip("/"))


def _maintenance_url(admin_url: str) -> str:
    parts = urlsplit(admin_url)
    return parts._replace(path="/postgres").geturl()


def connect_admin(admin_url: str, database: str | None = None) -> psycopg.Connection:
    """A connection as the owner, with one clear line when the server cannot be reached."""
    url = (
        admin_url
        if database is None
        else urlsplit(admin_url)._replace(path=f"/{database}").geturl()
    )
    try:
        # Nothing prepared: the owner's URL may reach the server through a transaction pooler.
        return psycopg.connect(url, autocommit=True, connect_timeout=10, prepare_threshold=None)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ImproperlyConfigured(
            f"cannot reach PostgreSQL as the owner (ADMIN_DATABASE_URL): {reason}; "
            "check the URL, or unset DATABASE_URL to use the embedded server"
        ) from exc


def ensure_logins(urls: DatabaseUrls, databases: tuple[str, ...] = ()) -> None:
    """Create the two logins (if missing), force their attributes, and grant them the database.

    The everyday login gets NOSUPERUSER NOBYPASSRLS (row-level security must apply to it); the
    system login gets BYPASSRLS; both get ``LOGIN_SETTINGS``. Run on every set-up, so a login
    changed by hand is put back.
    """
    app_user, app_password = _user_password(urls.app)
    system_user, system_password = _user_password(urls.system)
    if app_user == system_user:
        raise ImproperlyConfigured(
            "DATABASE_URL and SYSTEM_DATABASE_URL name the same login: the system login "
            "bypasses row-level security, so give it a login of its own"
        )
    names = {_database(urls.app), _database(urls.admin), *databases}
    with connect_admin(_maintenance_url(urls.admin)) as conn:
        for user, password, attributes in (
            (
                app_user,
                app_password,
                "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE",
            ),
            (
                system_user,
                system_password,
                "LOGIN NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE",
            ),
        ):
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone()
            verb = "ALTER" if exists else "CREATE"
            conn.execute(sql.SQL(f"{verb} ROLE {{}} {attributes}").format(sql.Identifier(user)))
            if password:
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(user), sql.Literal(password)
                    )
                )
            for name, value in LOGIN_SETTINGS:
                conn.execute(
                    sql.SQL("ALTER ROLE {} SET {} = {}").format(
                        sql.Identifier(user), sql.Identifier(name), sql.Literal(value)
                    )
                )
            if not exists:
                logger.info("login_created login=%s", user)
        for name in sorted(n for n in names if n):
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                logger.info("database_created database=%s", name)
            conn.execute(
                sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}, {}").format(
                    sql.Identifier(name),
                    sql.Identifier(app_user),
                    sql.Identifier(system_user),
                )
            )
