"""Refuse to start a process on a database set-up that would fail open, in one line.

``startup_problem()`` says what is wrong with the database set-up (unreachable, an embedded
server that is not running, an everyday login that would escape row-level security) as one
line naming what to change. It backs a Django system check (``manage.py`` commands), the web
entry points (``project/wsgi.py``, ``project/asgi.py``) and the long-running commands, which
print it instead of a traceback.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.utils import Error as DatabaseError

from tenancy.scope import SYSTEM_ALIAS


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def startup_problem() -> str | None:
    """What stops this process from serving safely, as one line; None when nothing does."""
    pgdata = getattr(settings, "EMBEDDED_PGDATA", None)
    try:
        problem = login_problems("default")
    except DatabaseError as exc:
        if pgdata is not None:
            from project.embedded import is_running

            if not is_running(pgdata):
                return (
                    f"the embedded PostgreSQL in {pgdata} is not running: start it with "
                    "bin/run (or python -m project.embedded start), or set DATABASE_URL"
                )
        return (
            f"cannot reach the database as the everyday login (DATABASE_URL): "
            f"{_first_line(exc)}; check DATABASE_URL, run manage.py create_logins, "
            "or unset DATABASE_URL to use the embedded server"
        )
    if problem:
        return (
            f"DATABASE_URL: {problem}, so row-level security would not apply and tenants would "
            "see each other's rows; point DATABASE_URL at the login manage.py create_logins "
            "creates (workqueue_app), which has neither"
        )
    return None


def refuse_unsafe_start() -> None:
    """Raise ``ImproperlyConfigured`` (one line) when ``startup_problem`` finds something."""
    problem = startup_problem()
    if problem:
        raise ImproperlyConfigured(problem)


def session_problems(alias: str) -> str | None:
    """Which of the login's ``LOGIN_SETTINGS`` its sessions do not start with, or None."""
    from project.logins import LOGIN_SETTINGS

    names = [name for name, _ in LOGIN_SETTINGS]
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT current_user, " + ", ".join(f"current_setting('{name}')" for name in names)
        )
        user, *values = cursor.fetchone()
    wrong = [
        f"{name} = {value}"
        for (name, want), value in zip(LOGIN_SETTINGS, values, strict=True)
        if value != want
    ]
    if not wrong:
        return None
    fix = ", ".join(f"ALTER ROLE {user} SET {name} = '{want}'" for name, want in LOGIN_SETTINGS)
    return (
        f"the login {user!r} starts its sessions with {', '.join(wrong)}: run manage.py "
        f"create_logins, which sets them on the login (or {fix}); the fair claim needs jit off "
        "(JIT compiled a claim over a million waiting items for 30 ms of its 31)"
    )


def database_setup(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check over ``startup_problem``: the everyday login must be reachable and
    obey row-level security (a superuser or BYPASSRLS login silently escapes it). Then a
    warning for each login whose sessions lack ``LOGIN_SETTINGS`` (set on the login, not at
    connect: a pooler refuses startup options)."""
    problem = startup_problem()
    if problem:
        return [checks.Error(problem, id="project.E001")]
    warnings = []
    for alias in ("default", SYSTEM_ALIAS):
        try:
            found = session_problems(alias)
        except DatabaseError as exc:
            found = f"cannot read the session settings of alias {alias}: {_first_line(exc)}"
        if found:
            warnings.append(checks.Warning(found, id="project.W001"))
    return warnings


def register() -> None:
    checks.register(database_setup, "database_logins")
