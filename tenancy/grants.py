"""What the everyday and system logins may do on the product's own tables, and nothing else.

Each of the product's installed apps keeps the narrowest grant its tables need beside them
(``<app>/sql/grants.sql``, ``{app}`` standing for the everyday login). ``apply_grants`` takes
every right of the two logins on the product's tables away, gives the system login what the
named tenant-less operations need (rows of every product table, but never rewriting history),
then runs each app's grants, all in one transaction. A table of the site's own keeps every
right it had: only the product's tables are named, table by table. Run by ``manage.py
grant_logins`` (and ``create_logins``) as the owner, after each ``migrate``; a site with one
login needs none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.apps import AppConfig, apps
from django.conf import settings
from django.db import connections, transaction
from psycopg import sql

from wqcore.conf import owner_alias, system_alias, tenant_alias

# The packages of the product (an app in one of them is "ours").
PACKAGES = frozenset({"workqueue", "tenancy", "audit", "outbox", "workers"})
# The only table of ours the system login may not rewrite.
APPEND_ONLY = ("workqueue_audit_auditentry",)


def our_apps() -> list[AppConfig]:
    return [c for c in apps.get_app_configs() if c.name.split(".")[0] in PACKAGES]


def our_tables() -> list[str]:
    """Every table the product's installed apps own (their models' and many-to-many tables)."""
    tables: set[str] = set()
    for config in our_apps():
        for model in config.get_models(include_auto_created=True):
            if model._meta.managed and not model._meta.proxy:
                tables.add(model._meta.db_table)
    return sorted(tables)


def grant_files() -> list[Path]:
    """Each of our installed apps' ``sql/grants.sql``, in INSTALLED_APPS order."""
    files = []
    for config in our_apps():
        path = Path(config.path) / "sql" / "grants.sql"
        if path.is_file():
            files.append(path)
    return files


def _login(alias: str) -> str:
    return str(settings.DATABASES[alias]["USER"])


def grant_statements(app_login: str, system_login: str, schema: str = "public") -> list[str]:
    """The statements ``apply_grants`` runs, in order."""
    app, system = sql.Identifier(app_login), sql.Identifier(system_login)
    existing = our_tables()
    tables = sql.SQL(", ").join(sql.Identifier(t) for t in existing)
    statements = [
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}, {}").format(sql.Identifier(schema), app, system),
        sql.SQL("REVOKE ALL ON {} FROM {}, {}").format(tables, app, system),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(tables, system),
    ]
    for table in APPEND_ONLY:
        if table in existing:
            statements.append(
                sql.SQL("REVOKE UPDATE, DELETE ON {} FROM {}").format(sql.Identifier(table), system)
            )
    for path in grant_files():
        statements.append(sql.SQL(path.read_text()).format(app=app, system=system))
    return [s.as_string() for s in statements]


def apply_grants(**_: Any) -> list[str]:
    """Grant the logins of the everyday and system aliases what they may do on our tables, as
    the owner; returns the statements run. Nothing when the two are one login, or the owner's
    (a site with one login: it owns the tables, row-level security is forced on it)."""
    app_login, system_login = _login(tenant_alias()), _login(system_alias())
    owner = owner_alias()
    if app_login == system_login or _login(owner) in (app_login, system_login):
        return []
    # One transaction: a live worker or web process sees the old rights until the new ones are
    # all in place, never the moment between the revoke and the grants.
    with transaction.atomic(using=owner), connections[owner].cursor() as cursor:
        cursor.execute(
            "SELECT current_schema(), EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')"
        )
        schema, citus = cursor.fetchone()
        if citus:
            # On Citus, grants on reference tables after grants on distributed ones in one
            # transaction need one connection per node.
            cursor.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
        statements = grant_statements(app_login, system_login, schema)
        for statement in statements:
            cursor.execute(statement)
    return statements
