"""What the install tests share: the wheel, built once a session from this repository; a fresh
virtualenv per supported Django with the wheel installed from it as a site's ``pip install``
would (its dependencies from the package index, nothing of this repository's locks); and the
test server, reached as its superuser, for the sites' own databases and logins.

    def test_x(venv: Path) -> None: ...              # runs once on each supported Django
    def test_y(venv_for: VenvFor) -> None:
        python = venv_for("5.2") / "bin" / "python"  # one Django's, made once a session
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connections

ROOT = Path(__file__).resolve().parents[2]

# Every Django the distribution supports (pyproject.toml's range and classifiers).
DJANGO_VERSIONS = ("5.2", "6.0", "6.1")
# What a site on each Django installs beside the wheel: psycopg's own libpq, and on 5.2 the
# django-tasks package that gives the @task backend Django's task API (django.tasks from 6.0).
EXTRAS = {"5.2": "binary,tasks", "6.0": "binary", "6.1": "binary"}
# What every site's virtualenv gets beside them: a site's own test tools (the site's tests
# use pytest-django and the queue's testing helpers). One virtualenv per Django serves every
# install test.
SITE_PACKAGES: tuple[str, ...] = ("pytest==9.*", "pytest-django==4.*")

# The test site's own app and its tests are the site's, run inside it, not by this suite.
collect_ignore = ["site"]

VenvFor = Callable[[str], Path]


def run(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 600,
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; a non-zero exit fails the test with the end of its output."""
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


def build_wheel(work: Path) -> Path:
    """The distribution's wheel, built from a copy of the tree as it is (its build folders stay
    out of the repository)."""
    source = work / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", ".pgdata*", "bench", "tests", "build", "*.egg-info", "__pycache__"
        ),
    )
    run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "-q", "-w", work / "dist")
    [wheel] = (work / "dist").glob("*.whl")
    return wheel


def make_venv(dest: Path, wheel: Path, django: str, packages: Sequence[str] = ()) -> Path:
    """A fresh virtualenv in ``dest`` with the wheel (and its extras for that Django), Django
    ``django`` (``"5.2"``: the newest 5.2.x) and ``packages``."""
    run(sys.executable, "-m", "venv", dest)
    run(
        dest / "bin" / "python",
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        f"{wheel}[{EXTRAS[django]}]",
        f"Django=={django}.*",
        *packages,
    )
    return dest


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this repository, once a session."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def venv_for(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> VenvFor:
    """``venv_for("5.2")``: the fresh virtualenv of that Django (with ``SITE_PACKAGES``), made
    on first use and shared by the session's tests after it."""
    made: dict[str, Path] = {}

    def venv(django: str) -> Path:
        if django not in made:
            dest = tmp_path_factory.mktemp(f"venv-django{django.replace('.', '')}")
            made[django] = make_venv(dest, wheel, django, SITE_PACKAGES)
        return made[django]

    return venv


@pytest.fixture(scope="session", params=DJANGO_VERSIONS, ids=lambda v: f"django{v}")
def venv(request: pytest.FixtureRequest, venv_for: VenvFor) -> Path:
    """The fresh virtualenv of each supported Django in turn: a test that takes it runs on
    every one."""
    return venv_for(request.param)


def server() -> dict[str, Any]:
    """How to reach the test server as its superuser (the test database's owner)."""
    entry = connections["admin"].settings_dict
    return {
        "host": entry.get("HOST") or None,
        "port": entry.get("PORT") or None,
        "user": entry["USER"],
        "password": entry.get("PASSWORD") or None,
    }


def superuser(dbname: str = "postgres") -> psycopg.Connection:
    """A connection to ``dbname`` as the server's superuser, in autocommit."""
    params = {k: v for k, v in server().items() if v}
    return psycopg.connect(dbname=dbname, autocommit=True, **params)


def database_entry(user: str, name: str, password: str | None = None) -> dict[str, Any]:
    """A site's ``DATABASES`` entry for ``user`` on database ``name`` of the test server."""
    found = server()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": user,
        "PASSWORD": password or "",
        "HOST": found["host"] or "",
        "PORT": found["port"] or "",
    }
