"""Bad set-up input gets one clear line, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from project.database import parse
from wqcore.conf import CONNECTION_OPTIONS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://u@h/db", "must be a PostgreSQL URL"),
        ("not a url", "must be a PostgreSQL URL"),
        ("postgres://u@h:5432", "names no database"),
        ("postgres://u@[h/db", r"is not a valid URL \(Invalid IPv6 URL\)"),
        ("postgres://u@h:port/db", r"is not a valid URL \(Port could not be cast"),
        ("postgres://u@h:99999/db", r"is not a valid URL \(Port out of range"),
        ("postgres://u@h1:5432,h2:port/db", r"is not a valid URL \(Port could not be cast"),
    ],
)
def test_a_malformed_url_is_refused_with_one_line(url: str, says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=says) as raised:
        parse("DATABASE_URL", url)
    assert "\n" not in str(raised.value)


def test_a_socket_url_keeps_its_host() -> None:
    config = parse("DATABASE_URL", "postgres://app@/workqueue?host=/run/pg")
    assert (config["USER"], config["NAME"], config["HOST"]) == (
        "app",
        "workqueue",
        "/run/pg",
    )


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_manage_py_says_what_to_change_for_a_malformed_url() -> None:
    done = _manage("check", DATABASE_URL="mysql://nobody@localhost/db")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        (
            "error: DATABASE_URL must be a PostgreSQL URL like "
            "postgres://user:password@host:5432/dbname (got scheme 'mysql'); "
            "unset DATABASE_URL to use the embedded server"
        )
    ]


def test_manage_py_says_what_to_change_for_an_unreachable_server() -> None:
    done = _manage("check", DATABASE_URL="postgres://nobody@127.0.0.1:9/db")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "cannot reach the database as the everyday login (DATABASE_URL)" in done.stderr


def test_a_multi_host_url_reaches_every_host_with_its_own_port_and_the_options() -> None:
    """libpq's multi-host form, as an operator writes it for a failover: each host with its
    port (or libpq's default), and the options (target_session_attrs) passed on to the driver."""
    config = parse(
        "DATABASE_URL",
        "postgres://app@db1:5433,db2,[::1]:5434/workqueue"
        "?target_session_attrs=read-write&connect_timeout=3",
    )
    assert (config["HOST"], config["PORT"]) == ("db1,db2,::1", "5433,,5434")
    assert config["OPTIONS"] == {
        **CONNECTION_OPTIONS,
        "target_session_attrs": "read-write",
        "connect_timeout": 3,
    }


def test_every_connection_has_keepalives_and_a_user_timeout_unless_its_url_sets_its_own() -> None:
    """A host that vanishes without refusing (a cut network) is noticed by the socket: libpq's
    keepalives and tcp_user_timeout by default, on every alias; the URL's own value wins."""
    config = parse("DATABASE_URL", "postgres://app@db1/workqueue")
    assert config["OPTIONS"] == CONNECTION_OPTIONS
    assert CONNECTION_OPTIONS["keepalives"] == 1 and CONNECTION_OPTIONS["tcp_user_timeout"] > 0
    own = parse("DATABASE_URL", "postgres://app@db1/workqueue?keepalives_idle=60")
    assert own["OPTIONS"] == {**CONNECTION_OPTIONS, "keepalives_idle": 60}


def test_the_keepalives_and_user_timeout_are_settings_read_before_the_rest() -> None:
    """A site's settings module fills DATABASES from its WORKQUEUE dict before Django reads it:
    only the four names are read, and a wrong one is one line naming it."""
    from django.core.exceptions import ImproperlyConfigured

    from wqcore.conf import connection_options

    chosen = connection_options({"DB_TCP_USER_TIMEOUT_MS": "4000", "LANES": ["unread"]})
    assert chosen == {**CONNECTION_OPTIONS, "tcp_user_timeout": 4000}
    assert parse("DATABASE_URL", "postgres://app@db1/wq", chosen)["OPTIONS"] == chosen
    with pytest.raises(ImproperlyConfigured, match=r"WORKQUEUE\['DB_KEEPALIVES_COUNT'\]"):
        connection_options({"DB_KEEPALIVES_COUNT": 0})


def test_an_alias_over_tcp_without_keepalives_is_warned_of() -> None:
    """A site's own DATABASES: Django's connections carry only what its OPTIONS say."""
    from workqueue.checks import keepalive_problems

    databases = {
        "default": {"HOST": "db1", "OPTIONS": {}},
        "system": {"HOST": "db1", "OPTIONS": dict(CONNECTION_OPTIONS)},
        "local": {"HOST": "/run/postgresql", "OPTIONS": {}},  # a socket: no TCP to keep alive
    }
    [problem] = keepalive_problems(databases, ["default", "system", "local", "default"])
    assert problem.startswith("DATABASES['default'] sets no keepalives"), problem
    assert "wqcore.conf.connection_options(WORKQUEUE)" in problem


def test_the_other_logins_urls_keep_every_host_and_option_of_database_url(monkeypatch) -> None:
    import environ

    from project.database import resolve_urls

    url = "postgres://app:pw@db1:5433,db2:5434/workqueue?target_session_attrs=read-write"
    for name in ("SYSTEM_DATABASE_URL", "ADMIN_DATABASE_URL", "DATABASE_DIRECT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", url)
    urls = resolve_urls(environ.Env(), ROOT)
    assert urls.system == (
        "postgres://workqueue_system@db1:5433,db2:5434/workqueue?target_session_attrs=read-write"
    )
    assert urls.admin == (
        "postgres://postgres@db1:5433,db2:5434/workqueue?target_session_attrs=read-write"
    )


def test_the_owners_connection_string_carries_the_urls_libpq_options() -> None:
    from tenancy.logins import _conninfo

    config = parse(
        "ADMIN_DATABASE_URL",
        "postgres://postgres@db1:5433,db2:5434/wq?target_session_attrs=read-write",
    )
    config["OPTIONS"]["isolation_level"] = 1  # Django's own: not libpq's
    keepalives = " ".join(f"{k}={v}" for k, v in CONNECTION_OPTIONS.items())
    assert _conninfo(config, "postgres") == (
        f"{keepalives} target_session_attrs=read-write dbname=postgres user=postgres"
        " host=db1,db2 port=5433,5434"
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgres://app:s%40cret@db.example:6432/workqueue",
        "postgres://app@/workqueue?host=/run/pg",
        "postgres://app@db1:5433,db2/workqueue?target_session_attrs=read-write",
        "postgres://app@/workqueue?host=/run/a,/run/b&port=5433,5434",
    ],
)
def test_url_for_is_the_inverse_of_parse(url: str) -> None:
    from project.database import url_for

    config = parse("DATABASE_URL", url)
    assert parse("DATABASE_URL", url_for(config)) == config


def test_importing_the_settings_starts_nothing(tmp_path: Path) -> None:
    """Issue 9: the settings read the environment and nothing else (no server, no logins)."""
    pgdata = tmp_path / "pgdata"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'project.settings'; "
                "django.setup(); from django.conf import settings; "
                "print(settings.DATABASES['default']['HOST'])"
            ),
        ],
        cwd=ROOT,
        env={**_without_database(), "EMBEDDED_PGDATA": str(pgdata)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(pgdata)
    assert not pgdata.exists()  # nothing was initialised or started


def test_a_process_on_an_embedded_server_that_is_not_running_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    pgdata = tmp_path / "pgdata"
    for command in (["check"], ["runworker", "NOOP"], ["sweep", "--once"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env={**_without_database(), "EMBEDDED_PGDATA": str(pgdata)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0 and "Traceback" not in done.stderr, command
        assert f"the embedded PostgreSQL in {pgdata} is not running" in done.stderr, command
        assert "python -m project.embedded start" in done.stderr


def _without_database() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "SYSTEM_DATABASE_URL", "ADMIN_DATABASE_URL")
    }


def test_runworker_refuses_a_port_out_of_range_in_one_line() -> None:
    done = _manage("runworker", "NOOP", "--metrics-port", "99999")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        (
            "CommandError: --metrics-port/WORKER_METRICS_PORT: must be a port (1-65535), 0 for "
            "any free port or -1 for none (got 99999)"
        )
    ]
