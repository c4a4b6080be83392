"""README's "Add it to your site", followed word by word in a fresh ``startproject`` site.

The section's code blocks are read from README.md, so a change there changes what this test
does: each Python block's parts go to the files their first comment names (``# settings.py``,
``# urls.py``, ``# myapp/work.py``, ...), appended to the site's own settings and URLs or
written as the app's modules; each shell block's commands run in order (``pip install`` is the
wheel built from this repository; ``runworker`` runs ``--once``). What the site does of its own
before that: ``django-admin startproject``, an app (``startapp myapp``) in ``INSTALLED_APPS``,
and its PostgreSQL database on one login that owns it. Then ``manage.py check`` prints no
warning, and a ``runserver`` answers ``/ops/healthz``, ``/ops/metrics`` and
``/ops/metrics/queue`` (where the README mounts them) over plain HTTP under a production
site's ``SECURE_SSL_REDIRECT`` (the README's exemption).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
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

from tests.install.pages import code_blocks, file_parts, free_port, get

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Add it to your site"
# Where each file the README names goes in a startproject site.
FILES = {
    "settings.py": "site_config/settings.py",
    "urls.py": "site_config/urls.py",
    "myapp/work.py": "myapp/work.py",
    "myapp/views.py": "myapp/views.py",
}
# The site's own files the README adds to (the rest it writes whole).
APPENDED = {"settings.py", "urls.py"}

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("django_db_setup")]


def install_blocks() -> list[tuple[str, str]]:
    """The fenced code blocks of the README's install section, in order: (language, text)."""
    return code_blocks(ROOT / "README.md", SECTION)


def _run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel built from this repository (psycopg's own libpq with
    it: the machine may have none)."""
    work = tmp_path_factory.mktemp("readme")
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


def _superuser(dbname: str = "postgres") -> psycopg.Connection[Any]:
    entry = connections["admin"].settings_dict
    params = {
        "host": entry.get("HOST"),
        "port": entry.get("PORT"),
        "user": entry["USER"],
        "password": entry.get("PASSWORD"),
    }
    return psycopg.connect(dbname=dbname, autocommit=True, **{k: v for k, v in params.items() if v})


@pytest.fixture
def database() -> Iterator[dict[str, str]]:
    """The site's database, on one login that owns it (no superuser, no BYPASSRLS)."""
    name = f"readme_{secrets.token_hex(4)}"
    with _superuser() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(name)
            )
        )
    entry = connections["admin"].settings_dict
    try:
        yield {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": name,
            "HOST": entry.get("HOST") or "",
            "PORT": str(entry.get("PORT") or ""),
        }
    finally:
        with _superuser() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name]
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


class Site:
    def __init__(self, root: Path, venv: Path) -> None:
        self.root = root
        self.venv = venv
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("WORKER_", "DATABASE", "DJANGO_", "WORKQUEUE"))
        }
        self.env["DJANGO_SETTINGS_MODULE"] = "site_config.settings"

    def manage(self, *args: str) -> str:
        return _run(self.venv / "bin" / "python", "manage.py", *args, cwd=self.root, env=self.env)

    def apply(self, language: str, block: str) -> None:
        """Do what one README block says."""
        if language == "python":
            for name, code in file_parts(block):
                assert name in FILES, f"README names {name}, a file this test does not place"
                path = self.root / FILES[name]
                if name in APPENDED:
                    path.write_text(path.read_text() + "\n" + code)
                else:
                    path.write_text(code)
            return
        assert language == "sh", f"a README block in {language}"
        for line in block.splitlines():
            command = shlex.split(line, comments=True)
            if not command:
                continue
            if command[:2] == ["pip", "install"]:
                continue  # the venv holds the wheel of this repository
            assert command[:2] == ["python", "manage.py"], (
                f"a README command this test cannot run: {line}"
            )
            if command[2] == "runworker":
                command += ["--once", "--metrics-port", "-1"]  # what is there, then exit
            said = self.manage(*command[2:])
            assert "WARNING" not in said and "Traceback" not in said, (line, said)


def test_the_readme_install_section_gives_a_site_that_checks_clean_and_answers(
    venv: Path, database: dict[str, str], tmp_path: Path
) -> None:
    root = tmp_path / "site"
    root.mkdir()
    _run(venv / "bin" / "django-admin", "startproject", "site_config", root)
    site = Site(root, venv)
    site.manage("startapp", "myapp")
    settings = root / "site_config" / "settings.py"
    own = f'INSTALLED_APPS += ["myapp"]\nDATABASES = {{"default": {database!r}}}\n'
    settings.write_text(settings.read_text() + "\n# -- the site's own --\n" + own)
    blocks = install_blocks()
    assert [language for language, _ in blocks].count("sh") >= 2, blocks
    for language, block in blocks:
        site.apply(language, block)

    checked = site.manage("check")
    assert checked.strip() == "System check identified no issues (0 silenced).", checked
    site.manage("shell", "-c", "import myapp.views")  # the README's view, as written
    settings.write_text(settings.read_text() + "\nSECURE_SSL_REDIRECT = True\n")

    port = free_port()
    server = subprocess.Popen(
        [str(venv / "bin" / "python"), "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=root,
        env=site.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        status, body = get(f"http://127.0.0.1:{port}/ops/healthz", server)
        assert status == 200, body
        assert json.loads(body) == {"database": "ok", "migrations": "applied", "healthy": True}
        status, body = get(f"http://127.0.0.1:{port}/ops/metrics", server)
        assert status == 200 and b"python_info" in body, body[:500]
        status, body = get(f"http://127.0.0.1:{port}/ops/metrics/queue", server)
        assert status == 200 and b"workqueue_work_failed" in body, body[:500]
    finally:
        server.terminate()
        server.communicate(timeout=30)  # reads and closes its pipe
