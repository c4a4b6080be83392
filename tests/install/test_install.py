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
- the site's own ``@task`` runs through the queue's ``TASKS`` backend and its result reads
  back (on Django 5.2 through the django-tasks package, the distribution's ``tasks`` extra);
- in a single-tenant site, ``manage.py shell -c`` enqueues and reads where the item stands
  (``api.status_of``: pending and not done, then done with its handler's ``None``), naming no
  tenant;
- per tenancy: one implicit tenant on one login that owns its tables (``single``); two orgs on
  the three logins (``orgs``); the site's own teams on one login (``shop.tenants.team_of``):
  a tenant never sees another's items;
- on every supported Django (5.2 LTS, 6.0, 6.1): the wheel is built once a session and each
  Django's virtualenv made once (``conftest.py``), a site per scenario.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from tests.install.conftest import (
    DJANGO_VERSIONS,
    VenvFor,
    database_entry,
    run,
    server,
    superuser,
)

SITE_APP = Path(__file__).with_name("site") / "shop"

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("django_db_setup")]


class Site:
    def __init__(
        self, root: Path, venv: Path, django: str, tenancy: str, dbname: str, roles: list[str]
    ) -> None:
        self.root = root
        self.python = venv / "bin" / "python"
        self.django = django
        self.tenancy = tenancy
        self.dbname = dbname
        self.roles = roles

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKER_", "DATABASE"))}
        env.update(DJANGO_SETTINGS_MODULE="site_config.settings", PYTHONPATH=str(self.root))
        return env

    def manage(self, *args: str, timeout: int = 600) -> str:
        return run(
            self.python, "manage.py", *args, cwd=self.root, env=self._env(), timeout=timeout
        ).stdout

    def own_tests(self) -> None:
        """The site's own tests (``shop/test_shop.py``: pytest-django and the queue's testing
        helpers), as its team runs them: pytest makes its test database, so its login may."""
        with superuser() as conn:
            conn.execute(sql.SQL("ALTER ROLE {} CREATEDB").format(sql.Identifier(self.roles[0])))
        (self.root / "pytest.ini").write_text(
            "[pytest]\nDJANGO_SETTINGS_MODULE = site_config.settings\n"
            "addopts = -p no:cacheprovider\n"
        )
        done = run(self.python, "-m", "pytest", "-q", "shop", cwd=self.root, env=self._env())
        assert re.search(r"^8 passed", done.stdout, re.M), done.stdout[-3000:]


def _make_site(tmp: Path, venv: Path, django: str, tenancy: str) -> Site:
    """``startproject``, the site's own app, the queue added as the README says."""
    root = tmp / f"site-{tenancy.split('.')[0]}"
    root.mkdir()
    run(venv / "bin" / "django-admin", "startproject", "site_config", root)
    shutil.copytree(SITE_APP, root / "shop", ignore=shutil.ignore_patterns("__pycache__"))
    tag = secrets.token_hex(4)
    dbname, login = f"site_{tag}", f"site_{tag}"
    roles = [login]
    with superuser() as conn:
        if tenancy == "orgs":
            # The orgs tenancy's three logins: the everyday one and the system one are made by
            # the queue's create_logins; the owner here is the server's superuser.
            roles += [f"{login}_system"]
            databases = {
                "default": database_entry(login, dbname),
                "system": database_entry(f"{login}_system", dbname),
                "owner": database_entry(server()["user"], dbname, server()["password"]),
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
            databases = {"default": database_entry(login, dbname)}
            queue = {"TENANCY": tenancy}
    apps = ["tenancy"] if tenancy == "orgs" else []
    settings = root / "site_config" / "settings.py"
    settings.write_text(
        settings.read_text()
        + f"""
# -- the work queue (README: "Add it to your site") --
ALLOWED_HOSTS = ["testserver", "localhost"]
INSTALLED_APPS += {apps!r} + [
    "audit", "workqueue", "outbox", "workers", "workers.django_tasks", "shop"
]
MIDDLEWARE += ["tenancy.middleware.TenancyMiddleware"]
DATABASES = {databases!r}
WORKQUEUE = {queue!r}
TASKS = {{"default": {{"BACKEND": "workers.django_tasks.backend.WorkQueueBackend"}}}}
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
            "    path('report/', __import__('shop.views').views.report),\n"
            "    path('report/<str:task_id>/', __import__('shop.views').views.report_result),\n"
            "    path('', include('workqueue.urls')),",
        )
    )
    return Site(root, venv, django, tenancy, dbname, roles)


def _drop(site: Site) -> None:
    with superuser() as conn:
        for name in (site.dbname, f"test_{site.dbname}"):
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name]
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        for role in site.roles:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.fixture
def site(request: pytest.FixtureRequest, venv_for: VenvFor, tmp_path: Path) -> Iterator[Site]:
    django, tenancy = request.param
    made = _make_site(tmp_path, venv_for(django), django, tenancy)
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
        with superuser(site.dbname) as conn:
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


# Every tenancy on the locks' Django; on the other supported ones the two that meet the most of
# Django (single: the site a team starts with; orgs: three aliases, routers, the logins'
# commands). The site's own tenancy adds only a resolver of the queue's to single, the same on
# every Django, so it runs once (each scenario is a whole site set up, run and checked).
SCENARIOS = [
    (django, tenancy)
    for django in DJANGO_VERSIONS
    for tenancy in ("single", "orgs", "shop.tenants.team_of")
    if django == DJANGO_VERSIONS[-1] or tenancy != "shop.tenants.team_of"
]


# What a single-tenant site's team types in ``manage.py shell -c``: enqueue, and read where the
# item stands, naming no tenant (the site's one is the default). One JSON line.
SHELL_ENQUEUE = """
import json
from shop.models import Order
from workqueue import api
Order.objects.create(number="4001")
item, _ = api.enqueue(api.context(), "SHOP_SEND_RECEIPT", {"order": "4001"})
now = api.status_of(api.context(), item.id)
done = now.result is not api.NOT_DONE
print(json.dumps({"id": str(item.id), "status": now.status, "done": done}))
"""
SHELL_STATUS = """
import json
from workqueue import api
now = api.status_of(api.context(), "{id}")
print(json.dumps({{"status": now.status, "result": now.result, "attempts": now.attempts}}))
"""


def _shell(site: Site, code: str) -> dict[str, object]:
    found: dict[str, object] = json.loads(site.manage("shell", "-c", code).strip().splitlines()[-1])
    return found


@pytest.mark.parametrize(
    "site", SCENARIOS, indirect=True, ids=[f"django{d}-{t.split('.')[0]}" for d, t in SCENARIOS]
)
def test_a_fresh_site_adds_the_queue_and_runs_its_own_work(site: Site) -> None:
    _set_up(site, site.tenancy)
    site.manage("check")
    before = json.loads(site.manage("scenario", "before").strip().splitlines()[-1])
    shelled = _shell(site, SHELL_ENQUEUE) if site.tenancy == "single" else None
    site.manage(
        "runworker", "SHOP_SEND_RECEIPT,DJANGO_TASK", "--once", "--metrics-port", "-1", timeout=120
    )
    after = json.loads(site.manage("scenario", "after").strip().splitlines()[-1])
    if shelled is not None:
        # Enqueued from the shell, pending and not done; the worker ran it: done, its handler's
        # None as the result, one attempt.
        assert (shelled["status"], shelled["done"]) == ("pending", False), shelled
        ran = _shell(site, SHELL_STATUS.format(id=shelled["id"]))
        assert ran == {"status": "done", "result": None, "attempts": 1}, ran
    if site.tenancy == "single":
        site.own_tests()
    assert after["requeued"] == before["dead"]
    assert after["templates"] == "django"
    assert after["tenants"] == (1 if site.tenancy == "single" else 2)
    assert after["task"] == "SUCCESSFUL"
    # On 5.2 the site's @task is the django-tasks package's (the [tasks] extra).
    api = "django_tasks" if site.django == "5.2" else "django.tasks"
    assert before["task_api"] == f"{api}.base"


# What a site may import of the queue: its face (workqueue.api), the testing helpers beside it,
# and, for the orgs tenancy, that app's own orgs and memberships.
SITE_FACE = ("workqueue.api", "workqueue", "workers.testing", "workers")
ORGS_APP = ("tenancy.models", "tenancy.contexts", "tenancy.scope")
OURS = ("wqcore", "tenancy", "audit", "workqueue", "outbox", "workers")


def test_the_site_imports_the_queue_only_through_its_face() -> None:
    import ast

    found = []
    for path in sorted(SITE_APP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            else:
                continue
            if module.split(".")[0] in OURS and module not in SITE_FACE + ORGS_APP:
                found.append(f"{path.relative_to(SITE_APP)}: {module}")
            if module in ("workqueue", "workers"):
                names = [alias.name for alias in node.names]
                assert set(names) <= {"api", "testing"}, (path, names)
    assert found == []
