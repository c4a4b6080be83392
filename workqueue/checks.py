"""Refuse to start on settings or a database set-up that would fail open, in one line.

``startup_problem()`` says what is wrong (a setting, an unreachable database, an everyday
login that would escape row-level security while tenants need fencing, a Citus database whose
workers would never learn the tenant) as one line naming what to change. It backs a Django
system check (every ``manage.py`` command), and the long-running commands (``runworker``,
``sweep``) print it instead of a traceback; a site's web entry point may call
``refuse_unsafe_start()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.utils import Error as DatabaseError

from wqcore.conf import (
    LOGIN_SETTINGS,
    listen_alias,
    owner_alias,
    system_alias,
    tenant_alias,
    wq_settings,
)

# The tag of the deploy check: ``manage.py check --database default --tag queued_work``.
QUEUED_WORK_TAG = "queued_work"

# A site's own words for an unreachable database, given the reason (the reference site: its
# embedded server, its environment variables); set by the site's AppConfig.ready().
unreachable_hint: Callable[[str], str] | None = None


def set_unreachable_hint(hint: Callable[[str], str]) -> None:
    """Say an unreachable database in the site's own words (its set-up, its variables)."""
    global unreachable_hint
    unreachable_hint = hint


def settings_problems() -> list[str]:
    """What is wrong with ``WORKQUEUE`` itself: unknown names, wrong types, lanes that are no
    lane names, aliases DATABASES lacks, a tenancy that cannot be used."""
    from tenancy.modes import current_tenancy
    from workqueue.exceptions import InvalidPayload
    from workqueue.inputs import check_lane

    try:
        wq_settings.get()
    except ImproperlyConfigured as exc:
        return [str(exc)]
    problems = []
    for lane in wq_settings.LANES:
        try:
            check_lane(lane, "WORKQUEUE['LANES']")
        except InvalidPayload as exc:
            problems.append(str(exc))
    for name in ("DATABASE_ALIAS", "SYSTEM_DATABASE_ALIAS", "OWNER_DATABASE_ALIAS"):
        alias = getattr(wq_settings, name)
        if alias and alias not in settings.DATABASES:
            problems.append(
                f"WORKQUEUE[{name!r}] is {alias!r}, which DATABASES does not have: name an alias "
                f"of DATABASES ({', '.join(settings.DATABASES)})"
            )
    try:
        current_tenancy()
    except ImproperlyConfigured as exc:
        problems.append(str(exc))
    return problems


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


def naming_problem(alias: str) -> str | None:
    """Why a tenant named on ``alias`` would not reach Citus's workers (every tenant query
    there would see 0 rows), or None: on a server without Citus, nothing can be wrong."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus'),"
            " current_setting('citus.propagate_set_commands', true), current_user"
        )
        citus, propagate, user = cursor.fetchone()
    if not citus:
        return None
    if wq_settings.TENANT_NAMING != "set_local":
        return (
            "the database has Citus, whose workers never see a tenant named with set_config "
            "(every tenant query would see 0 rows): set WORKQUEUE['TENANT_NAMING'] = "
            "'set_local' and run manage.py create_logins"
        )
    if propagate != "local":
        return (
            f"the login {user!r} starts its sessions with citus.propagate_set_commands = "
            f"{propagate}, so its SET LOCAL never reaches Citus's workers: run manage.py "
            f"create_logins (or ALTER ROLE {user} SET citus.propagate_set_commands = 'local')"
        )
    return layout_problem(alias)


def layout_problem(alias: str) -> str | None:
    """Why ``WORKQUEUE["CITUS"]`` does not match how the queue's tables lie on this Citus
    database, or None. Asked only where Citus is installed."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT FROM pg_dist_partition"
            " WHERE logicalrelid = to_regclass('workqueue_workitem'))"
        )
        distributed = cursor.fetchone()[0]
    if distributed and not wq_settings.CITUS:
        return (
            "the queue's tables are distributed on Citus (manage.py citus_distribute), which "
            "refuses some of the single server's statements: set WORKQUEUE['CITUS'] = True"
        )
    if wq_settings.CITUS and not distributed:
        return (
            "WORKQUEUE['CITUS'] is on but the queue's tables are not distributed: run "
            "manage.py citus_distribute after migrate"
        )
    if wq_settings.CITUS and wq_settings.HISTORY:
        return (
            "Citus cannot distribute history's tables (inheritance children): set "
            "WORKQUEUE['HISTORY'] = False"
        )
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def startup_problem() -> str | None:
    """What stops this process from serving safely, as one line; None when nothing does.

    The everyday login must obey row-level security wherever there is more than one tenant to
    fence (a single-tenant site has none to leak to)."""
    from tenancy.modes import current_tenancy

    problems = settings_problems()
    if problems:
        return "; ".join(problems)
    alias = tenant_alias()
    try:
        problem = login_problems(alias)
    except DatabaseError as exc:
        if unreachable_hint is not None:
            return unreachable_hint(_first_line(exc))
        return (
            f"cannot reach the database as the everyday login (DATABASES[{alias!r}]): "
            f"{_first_line(exc)}; check DATABASES[{alias!r}]"
        )
    if problem and current_tenancy().name != "single":
        return (
            f"DATABASES[{alias!r}]: {problem}, so row-level security would not apply and tenants "
            "would see each other's rows; use a login that has neither for the everyday alias "
            "(the tables' owner may be that login: row-level security is forced on it too)"
        )
    naming = naming_problem(alias)
    if naming:
        return f"DATABASES[{alias!r}]: {naming}"
    return None


def refuse_unsafe_start() -> None:
    """Raise ``ImproperlyConfigured`` (one line) when ``startup_problem`` finds something."""
    problem = startup_problem()
    if problem:
        raise ImproperlyConfigured(problem)


def session_problems(alias: str) -> str | None:
    """Which of ``LOGIN_SETTINGS`` the login's sessions do not start with, or None."""
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
    fix = "; ".join(f"ALTER ROLE {user} SET {name} = '{want}'" for name, want in LOGIN_SETTINGS)
    return (
        f"the login {user!r} starts its sessions with {', '.join(wrong)}: run manage.py "
        f"set_login_settings (or {fix}); the fair claim needs jit off (over many waiting "
        "items JIT compiles a claim for far longer than the claim runs)"
    )


def database_setup(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The system check over ``startup_problem``, then a warning for each login whose sessions
    lack ``LOGIN_SETTINGS`` (set on the login, not at connect: a pooler refuses startup
    options)."""
    problem = startup_problem()
    if problem:
        return [checks.Error(problem, id="workqueue.E001")]
    warnings: list[checks.CheckMessage] = []
    for alias in dict.fromkeys((tenant_alias(), system_alias())):
        try:
            found = session_problems(alias)
        except DatabaseError as exc:
            found = f"cannot read the session settings of alias {alias}: {_first_line(exc)}"
        if found:
            warnings.append(checks.Warning(found, id="workqueue.W001"))
    return warnings


def keepalive_problems(databases: dict[str, dict[str, Any]], aliases: Sequence[str]) -> list[str]:
    """The ``aliases`` of ``databases`` that reach PostgreSQL over TCP without libpq's keepalives
    in their OPTIONS (Django opens those connections itself, the web's and the sweep's; the
    queue's own carry them anyway)."""
    found = []
    for alias in dict.fromkeys(aliases):
        entry = databases.get(alias) or {}
        host = str(entry.get("HOST") or "")
        if host and not host.startswith("/") and "keepalives" not in (entry.get("OPTIONS") or {}):
            found.append(
                f"DATABASES[{alias!r}] sets no keepalives: a database host that vanishes "
                "without refusing (a cut network, a frozen VM) leaves its connections waiting on "
                "TCP for minutes; add **wqcore.conf.connection_options(WORKQUEUE) to its OPTIONS"
            )
    return found


def connection_options_check(app_configs: Any = None, **_: Any) -> list[checks.CheckMessage]:
    """A warning for each alias the queue uses whose connections would not notice a vanished
    host (``keepalive_problems``); ``manage.py check --deploy`` only."""
    try:
        wq_settings.get()
    except ImproperlyConfigured:
        return []  # database_setup says what is wrong with the settings
    aliases = [tenant_alias(), system_alias(), owner_alias()]
    listening = listen_alias()
    if listening:
        aliases.append(listening)
    return [
        checks.Warning(problem, id="workqueue.W002")
        for problem in keepalive_problems(settings.DATABASES, aliases)
    ]


def queued_work(databases: Sequence[str] | None = None, **_: Any) -> list[checks.CheckMessage]:
    """The deploy check (``deploy_check.py``): queued items of kinds this code does not register,
    and queued payloads its schemas refuse. Tagged ``database``, so it runs only where a command
    names a database (``check --database default``, ``migrate`` before it migrates)."""
    from workqueue.deploy_check import queued_problems

    if not databases:
        return []
    try:
        found = queued_problems()
    except DatabaseError:
        # Not migrated yet (nothing is queued), or unreachable (``database_setup`` says so).
        return []
    return [
        *(checks.Warning(str(p), id="workqueue.W010") for p in found.unknown),
        *(checks.Warning(str(p), id="workqueue.W011") for p in found.invalid),
    ]


def register() -> None:
    checks.register(database_setup, "database_logins")
    # A deployment's concern (``check --deploy``): a development site on one machine loses none.
    checks.register(connection_options_check, "database_logins", deploy=True)
    checks.register(queued_work, QUEUED_WORK_TAG, checks.Tags.database)
