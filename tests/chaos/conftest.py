"""The fault suites' clusters of their own (``tests/replication.py``): a primary made once per
module and migrated as an operator does (``create_logins``, ``migrate``, ``grant_logins``),
stopped, for each scenario to copy; and this process's three aliases pointed at a copy, as the
settings read the URLs from the environment, and put back after."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import environ
import pytest
from django.db import connections

from project.database import database_settings
from tests import replication, summary
from tests.replication import DATABASE
from tests.runtime.support import PYTHON, ROOT, subprocess_env

# The keys of a DATABASES entry that say where it connects.
_REACH = ("NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")
# The URL of each alias, by its variable, and the login it names.
LOGINS = (
    ("DATABASE_URL", "workqueue_app"),
    ("SYSTEM_DATABASE_URL", "workqueue_system"),
    ("ADMIN_DATABASE_URL", replication.SUPERUSER),
)


def _migrate(server: replication.Server) -> None:
    at = f"127.0.0.1:{server.port}/{DATABASE}"
    env = subprocess_env(
        DATABASE_URL=f"postgres://workqueue_app@{at}",
        SYSTEM_DATABASE_URL=f"postgres://workqueue_system@{at}",
        ADMIN_DATABASE_URL=f"postgres://{replication.SUPERUSER}@{at}",
        DATABASE_DIRECT_URL="",
        DATABASE_POOLER="",
    )
    commands = (
        ("create_logins", "--no-grants"),
        ("migrate", "--database", "admin", "--no-input"),
        ("grant_logins",),
    )
    for command in commands:
        done = subprocess.run(
            [PYTHON, "manage.py", *command, "--no-color"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def template(
    request: pytest.FixtureRequest, django_db_setup: None, django_db_blocker: Any
) -> Iterator[replication.Server]:
    """A migrated primary, stopped, for each scenario to copy (the module's ``SUITE`` names
    its summary line when no cluster can be made here)."""
    reason = replication.why_not()
    if reason is not None:
        suite = getattr(request.module, "SUITE", "failover")
        summary.state(suite, f"{suite}: skipped ({reason})")
        pytest.skip(reason)
    binaries = replication.find_bin()
    assert binaries is not None
    with django_db_blocker.unblock():  # subprocess_env reads the aliases' settings
        made = replication.template(binaries, _migrate)
    yield made
    made.remove()


@pytest.fixture
def aim(
    monkeypatch: pytest.MonkeyPatch, django_db_blocker: Any
) -> Iterator[Callable[[Callable[[str], str]], None]]:
    """``aim(url)`` points this process's three aliases at ``url(login)`` (and the variables
    a subprocess reads); the aliases are put back after the test."""
    saved = {
        alias: dict(connections[alias].settings_dict) for alias in ("default", "system", "admin")
    }

    def point(url: Callable[[str], str]) -> None:
        for variable, user in LOGINS:
            monkeypatch.setenv(variable, url(user))
        for variable in ("DATABASE_DIRECT_URL", "DATABASE_POOLER"):
            monkeypatch.delenv(variable, raising=False)
        entries = database_settings(environ.Env(), ROOT)
        connections.close_all()
        for alias in saved:
            connections[alias].settings_dict.update({k: entries[alias][k] for k in _REACH})

    with django_db_blocker.unblock():
        try:
            yield point
        finally:
            connections.close_all()
            for alias, entry in saved.items():
                connections[alias].settings_dict.clear()
                connections[alias].settings_dict.update(entry)
