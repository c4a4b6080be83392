"""Create the orgs tenancy's everyday and system logins, idempotently, as the owner.

``manage.py create_logins`` runs this for the logins the ``DATABASES`` entries of the everyday
and system aliases name (``WORKQUEUE["DATABASE_ALIAS"]``, ``["SYSTEM_DATABASE_ALIAS"]``),
connecting as the owner's (``["OWNER_DATABASE_ALIAS"]``). Roles are cluster-wide and the
database may not exist yet, so it connects to the server's ``postgres`` database, not through
Django.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg import sql

from wqcore.conf import LOGIN_SETTINGS
from wqcore.logs import log_event

logger = logging.getLogger(__name__)


def _libpq_keywords() -> frozenset[str]:
    return frozenset(option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults())


def _conninfo(db: dict[str, Any], dbname: str | None = None) -> str:
    """A libpq connection string for a ``DATABASES`` entry (another database when named), with
    the entry's options libpq knows (``target_session_attrs`` of a multi-host URL, ``sslmode``,
    ``connect_timeout``...); Django's own options are left out."""
    libpq = _libpq_keywords()
    params = {
        **{k: v for k, v in (db.get("OPTIONS") or {}).items() if k in libpq},
        "dbname": dbname or db.get("NAME"),
        "user": db.get("USER"),
        "password": db.get("PASSWORD") or None,
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
    }
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v})


def connect_owner(owner: dict[str, Any], dbname: str | None = None) -> psycopg.Connection:
    """A connection as the owner, with one clear line when the server cannot be reached."""
    try:
        # Nothing prepared: the owner may reach the server through a transaction pooler.
        return psycopg.connect(
            _conninfo(owner, dbname), autocommit=True, connect_timeout=10, prepare_threshold=None
        )
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ImproperlyConfigured(
            f"cannot reach PostgreSQL as the owner (login {owner.get('USER')!r}): {reason}; "
            "check the owner alias's DATABASES entry (WORKQUEUE['OWNER_DATABASE_ALIAS'])"
        ) from exc


def ensure_logins(
    app: dict[str, Any],
    system: dict[str, Any],
    owner: dict[str, Any],
    databases: tuple[str, ...] = (),
) -> None:
    """Create the two logins (if missing), force their attributes, and grant them the database.

    The everyday login gets NOSUPERUSER NOBYPASSRLS (row-level security must apply to it); the
    system login gets BYPASSRLS; both get ``LOGIN_SETTINGS`` and, where the everyday database
    has the citus extension, ``citus.propagate_set_commands = 'local'``. Run on every set-up,
    so a login changed by hand is put back.
    """
    app_user, app_password = str(app.get("USER") or ""), app.get("PASSWORD") or None
    system_user, system_password = str(system.get("USER") or ""), system.get("PASSWORD") or None
    if not app_user or not system_user:
        raise ImproperlyConfigured("the everyday and system aliases must each name a USER")
    if app_user == system_user:
        raise ImproperlyConfigured(
            "the everyday and system aliases name the same login: the system login bypasses "
            "row-level security, so give it a login of its own"
        )
    names = {app.get("NAME"), owner.get("NAME"), *databases}
    with connect_owner(owner, "postgres") as conn:
        _ensure_login(conn, app_user, app_password, "NOBYPASSRLS")
        _ensure_login(conn, system_user, system_password, "BYPASSRLS")
        for name in sorted(n for n in names if n):
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                log_event(logger, logging.INFO, "database_created", database=name)
            conn.execute(
                sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}, {}").format(
                    sql.Identifier(name),
                    sql.Identifier(app_user),
                    sql.Identifier(system_user),
                )
            )
    if app.get("NAME"):
        with connect_owner(owner, str(app["NAME"])) as conn:
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
                for user in (app_user, system_user):
                    _propagate_set_local(conn, user)


def _propagate_set_local(conn: Any, user: str) -> None:
    """On Citus: the login's ``SET LOCAL`` goes on to every worker its transaction uses, so the
    tenant named with ``WORKQUEUE["TENANT_NAMING"] = "set_local"`` reaches the shards. A login
    default, not a session's SET: it holds behind a transaction pooler."""
    conn.execute(
        sql.SQL("ALTER ROLE {} SET citus.propagate_set_commands = 'local'").format(
            sql.Identifier(user)
        )
    )


def _ensure_login(conn: Any, user: str, password: str | None, bypass: str) -> None:
    """Create ``user`` or put its attributes back (``bypass``: BYPASSRLS or NOBYPASSRLS), its
    password when one is given, and ``LOGIN_SETTINGS``."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone()
    verb = "ALTER" if exists else "CREATE"
    attributes = f"LOGIN NOSUPERUSER {bypass} NOCREATEDB NOCREATEROLE"
    conn.execute(sql.SQL(f"{verb} ROLE {{}} {attributes}").format(sql.Identifier(user)))
    if password:
        conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(user), sql.Literal(password))
        )
    for name, value in LOGIN_SETTINGS:
        conn.execute(
            sql.SQL("ALTER ROLE {} SET {} = {}").format(
                sql.Identifier(user), sql.Identifier(name), sql.Literal(value)
            )
        )
    if not exists:
        log_event(logger, logging.INFO, "login_created", login=user)
