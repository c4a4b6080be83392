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
- a developer's first week, in a site with tenants (``test_a_developers_first_week``): a
  worker named no kinds runs a kind added after it started once restarted (the unserved gauge
  and ``check`` flag it meanwhile), ``shell -c`` enqueues and reads a status inside
  ``api.tenant(...)``, a handler's bug shows its traceback on a pseudo-terminal and one JSON
  line in a pipe, and ``runworker --reload`` runs an edited handler;
- per tenancy: one implicit tenant on one login that owns its tables (``single``); two orgs on
  the three logins (``orgs``); the site's own teams on one login (``shop.tenants.team_of``):
  a tenant never sees another's items;
- on every supported Django (5.2 LTS, 6.0, 6.1): the wheel is built once a session and each
  Django's virtualenv made once (``conftest.py``), a site per scenario.
"""

from __future__ import annotations

import json
import os
import pty
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
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


# -- a developer's first week: what a team meets after the install --------------------------

# Kinds the team adds to ``shop/work.py`` while workers run: one that answers (its version,
# edited while a reloading worker runs), one with a bug.
LATER_KINDS = """

class NothingPayload(Payload):
    pass


LATE = register(Kind("SHOP_LATE", NothingPayload))
BROKEN = register(Kind("SHOP_BROKEN", NothingPayload, max_attempts=1))


@handles(LATE.name)
class Late:
    def handle(self, ctx, item, run):  # type: ignore[no-untyped-def]
        return {"v": 1}


@handles(BROKEN.name)
class Broken:
    def handle(self, ctx, item, run):  # type: ignore[no-untyped-def]
        return 1 / 0
"""
# What a team with tenants types in ``manage.py shell -c``: the documented tenant block, then
# enqueue (or read) and where the item stands. One JSON line.
SHELL_IN_TENANT = """
import json
from workqueue import api
with api.tenant("org-a") as ctx:
    if "{id}":
        now = api.status_of(ctx, "{id}")
        item_id = "{id}"
    else:
        item, _ = api.enqueue(ctx, "{kind}", {{}})
        now, item_id = api.status_of(ctx, item.id), str(item.id)
done = now.result is not api.NOT_DONE
print(json.dumps({{"id": item_id, "status": now.status, "done": done,
                  "result": now.result if done else None}}))
"""
SHELL_UNSERVED = """
import json
from workers.gauges import read_queue_gauges
print(json.dumps(read_queue_gauges().unserved_kinds.get(("default", "SHOP_LATE"))))
"""


def _in_tenant(site: Site, kind: str = "", item: str = "") -> dict[str, object]:
    return _shell(site, SHELL_IN_TENANT.format(kind=kind, id=item))


def _until(predicate: Callable[[], object], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _worker(site: Site, log: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    """A ``runworker`` left running, its output in ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(site.python), "manage.py", "runworker", *args, "--metrics-port", "-1"],
            cwd=site.root,
            env={**site._env(), **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()


def _on_a_terminal(site: Site, *args: str, **env: str) -> str:
    """``runworker`` with stdout and stderr on a pseudo-terminal: what it wrote there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [str(site.python), "manage.py", "runworker", *args],
        cwd=site.root,
        env={**site._env(), **env},
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every end of the follower is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize(
    "site", [(DJANGO_VERSIONS[-1], "orgs")], indirect=True, ids=[f"django{DJANGO_VERSIONS[-1]}"]
)
def test_a_developers_first_week(site: Site, tmp_path: Path) -> None:
    """In a site with tenants: a worker named no kinds, a kind added after it started (flagged
    by the gauge and by check, run after a restart), the shell's tenant block, a handler's bug
    on a terminal and in a JSON pipe, and a reloading worker that runs an edited handler."""
    settings = site.root / "site_config" / "settings.py"
    settings.write_text(
        settings.read_text()
        + "\nimport os\nfrom wqcore.logs import logging_config\n"
        + 'DEBUG = os.environ.get("SITE_DEBUG", "1") == "1"\n'
        + 'LOGGING = logging_config(level="INFO")\n'
        + 'WORKQUEUE["LOG_FORMAT"] = os.environ.get("SITE_LOG_FORMAT", "text")\n'
    )
    _set_up(site, site.tenancy)
    site.manage("scenario", "before")  # its orgs (org-a, org-b), members and first work
    work = site.root / "shop" / "work.py"
    log = tmp_path / "worker.log"

    # A worker named no kinds runs every kind its code had when it started.
    first = _worker(site, log, "--noreload")
    try:
        _until(lambda: "worker_started" in log.read_text(), "the worker's start")
        work.write_text(work.read_text() + LATER_KINDS)
        late = _in_tenant(site, kind="SHOP_LATE")
        assert (late["status"], late["done"]) == ("pending", False), late
        _until(lambda: _shell(site, SHELL_UNSERVED) is True, "the unserved gauge")
        checked = run(site.python, "manage.py", "check", cwd=site.root, env=site._env())
        assert "no running worker serves the kind 'SHOP_LATE'" in checked.stderr, checked.stderr
    finally:
        _stop(first)
    # Restarted, still naming none: the new kind is among every kind, and runs.
    site.manage("runworker", "--once", "--metrics-port", "-1", timeout=120)
    ran = _in_tenant(site, item=str(late["id"]))
    assert (ran["status"], ran["result"]) == ("done", {"v": 1}), ran

    # A handler's bug: its traceback on a terminal (DEBUG off); one JSON line in a pipe.
    once = ("SHOP_BROKEN", "--once", "--metrics-port", "-1")
    _in_tenant(site, kind="SHOP_BROKEN")
    shown = _on_a_terminal(site, *once, SITE_DEBUG="0")
    assert "Traceback (most recent call last)" in shown, shown[-3000:]
    assert "work.py" in shown and "ZeroDivisionError" in shown, shown[-3000:]
    _in_tenant(site, kind="SHOP_BROKEN")
    piped = run(
        site.python,
        "manage.py",
        "runworker",
        *once,
        cwd=site.root,
        env={**site._env(), "SITE_DEBUG": "0", "SITE_LOG_FORMAT": "json"},
    )
    lines = piped.stderr.strip().splitlines()
    failed = [json.loads(line) for line in lines if "item_dead_lettered" in line]
    assert len(failed) == 1 and all(line.startswith("{") for line in lines), piped.stderr
    assert "ZeroDivisionError" in failed[0]["exc"] and "work.py" in failed[0]["exc"]

    # --reload: an edited handler runs on the next item, with no restart by hand.
    log = tmp_path / "reloading.log"
    reloading = _worker(site, log, "--reload")
    try:
        _until(lambda: "worker_started" in log.read_text(), "the worker's start")
        before = _in_tenant(site, kind="SHOP_LATE")
        _until(lambda: _in_tenant(site, item=str(before["id"]))["done"], "the first run")
        work.write_text(work.read_text().replace('return {"v": 1}', 'return {"v": 2}'))
        _until(lambda: log.read_text().count("worker_started") >= 2, "the reload")
        after = _in_tenant(site, kind="SHOP_LATE")
        _until(lambda: _in_tenant(site, item=str(after["id"]))["done"], "the edited run")
        assert _in_tenant(site, item=str(after["id"]))["result"] == {"v": 2}
        assert "worker_reloading" in log.read_text()
    finally:
        _stop(reloading)
