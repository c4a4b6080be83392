"""Where the three database logins come from.

The product uses three logins on one database:

- the everyday login (alias ``default``, ``DATABASE_URL``): no superuser, no BYPASSRLS, so
  row-level security always applies to it;
- the system login (alias ``system``, ``SYSTEM_DATABASE_URL``): BYPASSRLS, used only by the
  named tenant-less operations (the claim, the purges, the gauges, the outbox relay's read);
- the owner login (alias ``admin``, ``ADMIN_DATABASE_URL``): owns the tables, runs migrations
  and creates the other two logins.

Behind a transaction pooler (PgBouncer's ``pool_mode = transaction``; ``DATABASE_POOLER``) the
connections send nothing at connect that the pooler would refuse, use no server-side cursors,
and the store prepares nothing; the connections that need a session of their own (the workers'
LISTEN) reach PostgreSQL at ``DATABASE_DIRECT_URL`` instead (docs/howto/pgbouncer.md).

With no ``DATABASE_URL`` the project uses an embedded PostgreSQL in a git-ignored folder; the
set-up path (``bin/run``, ``bin/test``: ``python -m project.embedded start`` then
``manage.py create_logins``) starts it and creates the logins. Reading the settings only
computes its URLs: importing them starts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, quote, urlencode, urlsplit, urlunsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from wqcore.conf import CONNECTION_OPTIONS

APP_LOGIN = "workqueue_app"
SYSTEM_LOGIN = "workqueue_system"
DATABASE_NAME = "workqueue"
# One test database for every alias: the owner creates and migrates it, the others point at it.
TEST_DATABASE_NAME = "test_workqueue"
# The alias DATABASE_DIRECT_URL becomes (the workers LISTEN on it).
DIRECT_ALIAS = "direct"
# The poolers DATABASE_POOLER may name: "transaction" (a server connection per transaction, as
# PgBouncer's pool_mode = transaction); unset, or "none", when the connections reach PostgreSQL
# itself (or a session pooler, which keeps each client on one server connection).
POOLER_MODES = ("none", "transaction")


@dataclass(frozen=True)
class DatabaseUrls:
    app: str
    system: str
    admin: str


def _hosts(netloc: str) -> list[str]:
    """The ``host[:port]`` entries of a URL's network location: one, or several in libpq's
    multi-host form (``user@host1:5432,host2:5433``, tried in turn, as
    ``target_session_attrs`` says)."""
    return netloc.rpartition("@")[2].split(",")


def _split(name: str, url: str) -> SplitResult:
    """``urlsplit(url)``, each host's port read, or one line naming the setting when it is
    malformed (an unclosed ``[``, a port that is not a number)."""
    try:
        parts = urlsplit(url)
        for host in _hosts(parts.netloc):
            urlsplit(f"//{host}").port  # noqa: B018 (reading it is the check)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"{name} is not a valid URL ({exc}): write it like "
            "postgres://user:password@host:5432/dbname, or unset DATABASE_URL to use the "
            "embedded server"
        ) from None
    return parts


def _with_user(url: str, user: str) -> str:
    """The same servers (every host of a multi-host URL), database and options as ``url``,
    reached as ``user`` with no password."""
    parts = urlsplit(url)
    netloc = f"{quote(user)}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def url_for(db: dict[str, Any]) -> str:
    """The URL of a ``DATABASES`` entry (the inverse of ``parse``): socket directories and
    several hosts (``HOST`` and ``PORT`` comma-separated, as libpq takes them) included, and
    the connection's options (``target_session_attrs``...) as its query."""
    user = quote(str(db["USER"]))
    password = f":{quote(str(db['PASSWORD']))}" if db.get("PASSWORD") else ""
    hosts = str(db.get("HOST") or "").split(",")
    ports = str(db.get("PORT") or "").split(",")
    options = {k: str(v) for k, v in (db.get("OPTIONS") or {}).items()}
    if any(host.startswith("/") for host in hosts):
        # A unix socket directory goes in the query, as parse reads it.
        where = {"host": db["HOST"], **({"port": db["PORT"]} if db.get("PORT") else {})}
        query = urlencode({**where, **options}, safe="/,")
        return f"postgres://{user}{password}@/{db['NAME']}?{query}"
    if len(ports) == 1:  # one port (or none) for every host
        ports = ports * len(hosts)
    netloc = ",".join(
        (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
        for host, port in zip(hosts, ports, strict=True)
    )
    query = f"?{urlencode(options, safe='/,')}" if options else ""
    return f"postgres://{user}{password}@{netloc}/{db['NAME']}{query}"


# The longest path a unix socket may have (sun_path, Linux), with the server's socket name.
_SOCKET_PATH_MAX = 107
SOCKET_NAME = ".s.PGSQL.5432"


def embedded_socket_dir(pgdata: Path) -> Path:
    """Where the embedded server's socket lives: its data folder (``project.embedded`` starts it
    so). Pure: it neither starts the server nor looks at the disk."""
    pgdata = pgdata.absolute()
    if len(str(pgdata / SOCKET_NAME)) > _SOCKET_PATH_MAX:
        raise ImproperlyConfigured(
            f"EMBEDDED_PGDATA={pgdata} is too long a path for the embedded server's socket; "
            "set EMBEDDED_PGDATA to a shorter path"
        )
    return pgdata


def embedded_urls(pgdata: Path) -> DatabaseUrls:
    """The three URLs of the embedded PostgreSQL kept in ``pgdata`` (see ``project.embedded``,
    which starts it; these URLs are only computed here)."""
    socket_dir = embedded_socket_dir(pgdata)
    return DatabaseUrls(
        app=f"postgres://{APP_LOGIN}@/{DATABASE_NAME}?host={socket_dir}",
        system=f"postgres://{SYSTEM_LOGIN}@/{DATABASE_NAME}?host={socket_dir}",
        admin=f"postgres://postgres@/{DATABASE_NAME}?host={socket_dir}",
    )


def embedded_pgdata(env: environ.Env, base_dir: Path) -> Path | None:
    """The embedded server's data folder when ``DATABASE_URL`` is unset, else None."""
    if env.str("DATABASE_URL", default=""):
        return None
    return Path(env.str("EMBEDDED_PGDATA", default=str(base_dir / ".pgdata"))).absolute()


def resolve_urls(env: environ.Env, base_dir: Path) -> DatabaseUrls:
    """The three URLs from the environment, or from the embedded server when none is set.

    The owner's default is the server ``DATABASE_DIRECT_URL`` names when it is set (migrations
    and grants want a session of their own, not a pooler's), else ``DATABASE_URL``'s."""
    pgdata = embedded_pgdata(env, base_dir)
    if pgdata is not None:
        return embedded_urls(pgdata)
    app = env.str("DATABASE_URL")
    _split("DATABASE_URL", app)
    direct = env.str("DATABASE_DIRECT_URL", default="") or app
    _split("DATABASE_DIRECT_URL", direct)
    return DatabaseUrls(
        app=app,
        system=env.str("SYSTEM_DATABASE_URL", default="") or _with_user(app, SYSTEM_LOGIN),
        admin=env.str("ADMIN_DATABASE_URL", default="") or _with_user(direct, "postgres"),
    )


def pooler_mode(env: environ.Env) -> str:
    """``DATABASE_POOLER``: "transaction" when a transaction pooler stands between the
    connections and PostgreSQL, else "none"; anything else is refused in one line."""
    mode = env.str("DATABASE_POOLER", default="").strip().lower() or "none"
    if mode not in POOLER_MODES:
        raise ImproperlyConfigured(
            f"DATABASE_POOLER must be one of {', '.join(POOLER_MODES)} (got {mode!r}): "
            "transaction when PgBouncer (pool_mode = transaction) or another transaction "
            "pooler is in front of PostgreSQL, else leave it unset"
        )
    return mode


def parse(name: str, url: str, connection: dict[str, int] = CONNECTION_OPTIONS) -> dict[str, Any]:
    """One ``DATABASES`` entry from a URL, refusing anything but PostgreSQL with one clear line;
    ``connection``: the keepalives and user timeout it carries unless the URL sets its own."""
    parts = _split(name, url)
    scheme = parts.scheme
    if scheme not in ("postgres", "postgresql", "pgsql"):
        raise ImproperlyConfigured(
            f"{name} must be a PostgreSQL URL like postgres://user:password@host:5432/dbname "
            f"(got scheme {scheme or 'none'!r}); unset DATABASE_URL to use the embedded server"
        )
    try:
        config = environ.Env.db_url_config(url)
    except Exception as exc:
        raise ImproperlyConfigured(f"{name} is not a valid database URL: {exc}") from exc
    if not config.get("NAME"):
        raise ImproperlyConfigured(f"{name} names no database: add /dbname to the URL")
    config["ENGINE"] = "django.db.backends.postgresql"
    # django-environ leaves ?host=/socket/dir (and ?port=) in OPTIONS; Django (and
    # create_logins) read HOST and PORT.
    options = config.get("OPTIONS", {})
    for key in ("host", "port"):
        if key in options:
            config[key.upper()] = str(options.pop(key))
    # Keepalives and the user timeout on every connection, unless the URL sets its own.
    config["OPTIONS"] = {**connection, **options}
    hosts = _hosts(parts.netloc)
    if len(hosts) > 1:
        # Several hosts, each with its own port or none (libpq's default for that host):
        # django-environ drops a missing port from the list, and the rest would pair with
        # the wrong hosts.
        split = [urlsplit(f"//{host}") for host in hosts]
        config["HOST"] = ",".join(s.hostname or "" for s in split)
        ports = [str(s.port or "") for s in split]
        config["PORT"] = ",".join(ports) if any(ports) else ""
    return config


def database_settings(
    env: environ.Env, base_dir: Path, connection: dict[str, int] = CONNECTION_OPTIONS
) -> dict[str, dict[str, Any]]:
    """``DATABASES`` for the three logins; every alias shares one test database; ``connection``
    as ``parse`` takes it (``wqcore.conf.connection_options`` of the site's ``WORKQUEUE``).

    Nothing goes in the startup packet but the login and the database: a pooler refuses what
    it does not know (PgBouncer: ``unsupported startup parameter: options``), and a setting
    sent there would hold on the one server connection it reached, not on the next transaction's.
    The logins' session settings (``jit = off``, UTC) are the logins' own, set by
    ``create_logins`` (``wqcore.conf.LOGIN_SETTINGS``), so every connection starts with them,
    through a pooler or not. With ``DATABASE_DIRECT_URL``, a ``direct`` alias: the everyday
    login reaching PostgreSQL itself, for the workers' LISTEN (a transaction pooler cannot)."""
    urls = resolve_urls(env, base_dir)
    pooled = pooler_mode(env) == "transaction"
    # Workers and web processes hold their connections: reconnecting per loop costs two thirds
    # of a worker's speed (a Django worker with CONN_MAX_AGE=0 ran at a third of its speed).
    conn_max_age = env.int("CONN_MAX_AGE", default=600)
    databases = {}
    for alias, name, url in (
        ("default", "DATABASE_URL", urls.app),
        ("system", "SYSTEM_DATABASE_URL", urls.system),
        ("admin", "ADMIN_DATABASE_URL", urls.admin),
    ):
        config = parse(name, url, connection)
        config["CONN_MAX_AGE"] = conn_max_age
        config["CONN_HEALTH_CHECKS"] = True
        if pooled:
            # QuerySet.iterator() declares a cursor that outlives its transaction in autocommit
            # (WITH HOLD): the next transaction may run on another server connection.
            config["DISABLE_SERVER_SIDE_CURSORS"] = True
        config["TEST"] = {"NAME": TEST_DATABASE_NAME}
        databases[alias] = config
    direct = env.str("DATABASE_DIRECT_URL", default="")
    if direct:
        config = parse("DATABASE_DIRECT_URL", direct, connection)
        config["CONN_MAX_AGE"] = conn_max_age
        config["TEST"] = {"NAME": TEST_DATABASE_NAME}
        databases[DIRECT_ALIAS] = config
    return databases
