"""The session defaults every login of the queue starts with (``wqcore.conf.LOGIN_SETTINGS``:
jit off, UTC), set on each login by itself.

``ALTER ROLE CURRENT_USER SET ...`` needs no privilege: any login may set its own defaults. So
a site on one login of its own (the single tenancy, or its own tenants) sets them with
``manage.py set_login_settings``, and the orgs tenancy's ``create_logins`` sets them as the
owner. Set on the login, never sent at connect: a transaction pooler refuses startup options,
and a ``SET`` would hold on one server connection only.
"""

from __future__ import annotations

from django.db import connections
from psycopg import sql

from wqcore.conf import LOGIN_SETTINGS, system_alias, tenant_alias


def statements() -> list[sql.Composed]:
    return [
        sql.SQL("ALTER ROLE CURRENT_USER SET {} = {}").format(
            sql.Identifier(name), sql.Literal(value)
        )
        for name, value in LOGIN_SETTINGS
    ]


def set_login_settings() -> dict[str, list[str]]:
    """Set ``LOGIN_SETTINGS`` on the logins of the everyday and system aliases (from their next
    session on); returns each login with its aliases."""
    done: dict[str, list[str]] = {}
    for alias in dict.fromkeys((tenant_alias(), system_alias())):
        connection = connections[alias]
        with connection.cursor() as cursor:
            for statement in statements():
                cursor.execute(statement.as_string(connection.connection))
            cursor.execute("SELECT current_user")
            (user,) = cursor.fetchone()
        done.setdefault(user, []).append(alias)
    return done
