"""The queue installed into a Django site of its own, as a team with a site would add it.

The wheel is built from this repository and installed into a fresh virtualenv; a fresh site is
made with ``django-admin startproject`` (Django's own ``auth.User``, integer ids), with an app of
its own (``tests/install/site/shop``: orders, a view that enqueues in its request's transaction,
a kind and handler in ``shop/work.py``). The site adds the queue's apps, includes its URL
module, migrates, and then, with the site's own tools (its ``manage.py``, Django's test client in
the site's process: ``shop/management/commands/scenario.py``):

- the site's own table is read and written by its login as before;
- a view enqueues in its request's transaction (a view that fails leaves nothing);
- ``runworker`` runs the site's handler; a failing item becomes a dead letter the site's admin
  lists and the operator requeues (audited, named as the site's own user id);
- the site's own admin pages are drawn by Django's own templates;
- per tenancy: one implicit tenant on one login that owns its tables (``single``); two orgs on
  the three logins (``orgs``); the site's own teams on one login (``shop.tenants.team_of``):
  a tenant never sees another's items.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connections
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
SITE_APP = Path(__file__).with_name("site") / "shop"

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("django_db_setup")]


def _run(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 600,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel built from this repository, and nothing else of it."""
    work = tmp_path_factory.mktemp("install")
    # Built from a copy of the tree as it is (its build folders stay out of the repository).
    source = work / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", ".pgdata*", "bench", "tests", "build", "*.egg-info", "__pycache__"
        ),
    )
    _run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "-q", "-w", work / "dist")
    [wheel] = (work / "dist").glob("*.whl")
    _run(sys.executable, "-m", "venv", work / "venv")
    python = work / "venv" / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{wheel}[binary]")
    return work / "venv"


def _server() -> dict[str, Any]:
    """How to reach the test server as its superuser (the test database's owner)."""
    entry = connections["admin"].settings_dict
    return {
        "host": entry.get("HOST") or None,
        "port": entry.get("PORT") or None,
        "user": entry["USER"],
        "password": entry.get("PASSWORD") or None,
    }


def _superuser(dbname: str = "postgres") -> psycopg.Connection:
    params = {k: v for k, v in _server().items() if v}
    return psycopg.connect(dbname=dbname, autocommit=True, **params)


def _entry(user: str, name: str, password: str | None = None) -> dict[str, Any]:
    server = _server()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": user,
        "PASSWORD": password or "",
        "HOST": server["host"] or "",
        "PORT": server["port"] or "",
    }


class Site:
    def __init__(self, root: Path, venv: Path, dbname: str, roles: list[str]) -> None:
        self.root = root
        self.python = venv / "bin" / "python"
        self.dbname = dbname
        self.roles = roles

    def manage(self, *args: str, timeout: int = 600) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKER_", "DATABASE"))}
        env.update(DJANGO_SETTINGS_MODULE="site_config.settings", PYTHONPATH=str(self.root))
        return _run(self.python, "manage.py", *args, cwd=self.root, env=env, timeout=timeout).stdout


def _make_site(tmp: Path, venv: Path, tenancy: str) -> Site:
    """``startproject``, the site's own app, the queue added as the README says."""
    root = tmp / f"site-{tenancy.split('.')[0]}"
    root.mkdir()
    _run(venv / "bin" / "django-admin", "startproject", "site_config", root)
    shutil.copytree(SITE_APP, root / "shop", ignore=shutil.ignore_patterns("__pycache__"))
    tag = secrets.token_hex(4)
    dbname, login = f"site_{tag}", f"site_{tag}"
    roles = [login]
    with _superuser() as conn:
        if tenancy == "orgs":
            # The orgs tenancy's three logins: the everyday one and the system one are made by
            # the queue's create_logins; the owner here is the server's superuser.
            roles += [f"{login}_system"]
            databases = {
                "default": _entry(login, dbname),
                "system": _entry(f"{login}_system", dbname),
                "owner": _entry(_server()["user"], dbname, _server()["password"]),
            }
            queue = {
                "TENANCY": "orgs",
                "SYSTEM_DATABASE_ALIAS": "system",
                "OWNER_DATABASE_ALIAS": "owner",
            }
        else:
            # One login that owns its tables (and its database): no superuser, no BYPASSRLS.
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(login)))
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(dbname), sql.Identifier(login)
                )
            )
            databases = {"default": _entry(login, dbname)}
            queue = {"TENANCY": tenancy}
    apps = ["tenancy"] if tenancy == "orgs" else []
    settings = root / "site_config" / "settings.py"
    settings.write_text(
        settings.read_text()
        + f"""
# -- the work queue (README: "Add it to your site") --
ALLOWED_HOSTS = ["testserver", "localhost"]
INSTALLED_APPS += {apps!r} + ["audit", "workqueue", "outbox", "workers", "shop"]
MIDDLEWARE += ["tenancy.middleware.TenancyMiddleware"]
DATABASES = {databases!r}
WORKQUEUE = {queue!r}
"""
    )
    urls = root / "site_config" / "urls.py"
    urls.write_text(
        urls.read_text()
        .replace("from django.urls import path", "from django.urls import include, path")
        .replace(
            "    path('admin/', admin.site.urls),",
            "    path('admin/', admin.site.urls),\n"
            "    path('checkout/', __import__('shop.views').views.checkout),\n"
            "    path('', include('workqueue.urls')),",
        )
    )
    return Site(root, venv, dbname, roles)


def _drop(site: Site) -> None:
    with _superuser() as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            [site.dbname],
        )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(site.dbname)))
        for role in site.roles:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.fixture
def site(request: pytest.FixtureRequest, venv: Path, tmp_path: Path) -> Iterator[Site]:
    made = _make_site(tmp_path, venv, request.param)
    try:
        yield made
    finally:
        _drop(made)


def _set_up(site: Site, tenancy: str) -> None:
    if tenancy == "orgs":
        site.manage("create_logins", "--no-grants")
    site.manage("makemigrations", "shop", "--verbosity", "0")  # the site's own app
    if tenancy == "orgs":
        site.manage("migrate", "--database", "owner", "--verbosity", "0")
        # The site grants its login its own tables, as it did before the queue came; then the
        # queue narrows the two logins' rights on its tables to what each needs.
        with _superuser(site.dbname) as conn:
            for role in site.roles:
                conn.execute(
                    sql.SQL(
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}"
                    ).format(sql.Identifier(role))
                )
                conn.execute(
                    sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(
                        sql.Identifier(role)
                    )
                )
        site.manage("grant_logins")
    else:
        site.manage("migrate", "--verbosity", "0")


@pytest.mark.parametrize("site", ["single", "orgs", "shop.tenants.team_of"], indirect=True)
def test_a_fresh_site_adds_the_queue_and_runs_its_own_work(site: Site) -> None:
    tenancy = site.root.name.removeprefix("site-")
    tenancy = {"shop": "shop.tenants.team_of"}.get(tenancy, tenancy)
    _set_up(site, tenancy)
    site.manage("check")
    before = json.loads(site.manage("scenario", "before").strip().splitlines()[-1])
    site.manage("runworker", "SHOP_SEND_RECEIPT", "--once", "--metrics-port", "-1", timeout=120)
    after = json.loads(site.manage("scenario", "after").strip().splitlines()[-1])
    assert after["requeued"] == before["dead"]
    assert after["templates"] == "django"
    assert after["tenants"] == (1 if tenancy == "single" else 2)
