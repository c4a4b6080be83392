"""System checks that refuse to start a process on a database set-up that would fail open."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db import connections
from django.db.utils import Error as DatabaseError


def login_problems(alias: str) -> str | None:
    """Why the login of ``alias`` would escape row-level security, or None when it cannot."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        user, superuser, bypass = cursor.fetchone()
    if superuser:
        return f"the login {user!r} is a superuser"
    if bypass:
        return f"the login {user!r} has BYPASSRLS"
    return None


def everyday_login_obeys_rls(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Refuse a ``DATABASE_URL`` login that is a superuser or has BYPASSRLS.

    Row-level security silently does not apply to such a login, so every tenant would see every
    other tenant's rows.
    """
    try:
        problem = login_problems("default")
    except DatabaseError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [
            checks.Error(
                f"cannot reach the database as the everyday login (DATABASE_URL): {reason}",
                hint="Check DATABASE_URL, run `manage.py create_logins`, "
                "or unset DATABASE_URL to use the embedded server.",
                id="project.E001",
            )
        ]
    if problem:
        return [
            checks.Error(
                f"DATABASE_URL: {problem}, so row-level security would not apply and tenants "
                "would see each other's rows",
                hint="Point DATABASE_URL at the login `manage.py create_logins` creates "
                "(workqueue_app), which has neither.",
                id="project.E002",
            )
        ]
    return []


def register() -> None:
    checks.register(everyday_login_obeys_rls, "database_logins")
