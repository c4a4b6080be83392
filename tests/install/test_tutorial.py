"""The documentation's tutorial (docs/tutorial.md), followed word by word in a new site.

Its code blocks are read from the page, so a change there changes what this test does:

- each ``console`` block's ``$ `` lines run in order, in a shell whose ``python`` and
  ``django-admin`` are those of a fresh virtualenv holding the wheel built from this repository,
  and what each prints (stdout and stderr, as a terminal shows them) must match the lines shown
  under it, where ``…`` alone on a line stands for any lines and ``…`` within a line for any
  text. ``cd`` moves the shell; ``runserver`` starts in the background (the page's second
  terminal) on a free port, which the later commands reach where the page says
  ``127.0.0.1:8000``.
- each ``python`` block's parts are written to the files their first comment names, relative
  to where the shell is (``(add at the end)``: appended to the file).

What this test does of its own, as the page tells the reader to: it makes the database and its
login (the ``sql`` block), and writes the connection service file (the ``ini`` block) naming
them. The virtualenv, ``source .venv/bin/activate`` and the ``pip install`` are the fixture's.
The names it makes for the database and its login are shown as the page's (``mysite``).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from tests.install.conftest import DJANGO_VERSIONS, ROOT, VenvFor, server, superuser
from tests.install.pages import code_blocks, file_parts, free_port, get

PAGE = ROOT / "docs" / "tutorial.md"
# The page's own names for what the reader makes, and its server's address.
PAGE_LOGIN = "mysite"
PAGE_ADDRESS = "127.0.0.1:8000"
# What the test's own virtualenv already did.
SKIPPED = (("python3", "-m", "venv"), ("source",), ("pip", "install"))

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("django_db_setup")]


def matches(shown: list[str], said: list[str]) -> bool:
    """Whether ``said`` is what ``shown`` shows: ``…`` alone is any lines, ``…`` in a line any
    text."""
    if not shown:
        return not said
    if shown[0] == "…":
        return any(matches(shown[1:], said[i:]) for i in range(len(said) + 1))
    if not said:
        return False
    pattern = ".*".join(map(re.escape, shown[0].split("…")))
    return re.fullmatch(pattern, said[0]) is not None and matches(shown[1:], said[1:])


def commands(block: str) -> Iterator[tuple[str, list[str]]]:
    """A console block's commands, each with the lines shown under it."""
    command: str | None = None
    shown: list[str] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            if command is not None:
                yield command, shown
            command, shown = line[2:], []
        else:
            assert command is not None, f"output before any command: {line!r}"
            shown.append(line.rstrip())
    if command is not None:
        yield command, shown


@pytest.fixture
def login() -> Iterator[str]:
    """The page's database and login (no superuser, owning its database), named afresh."""
    name = f"tutorial_{secrets.token_hex(4)}"
    with superuser() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(name)
            )
        )
    try:
        yield name
    finally:
        with superuser() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name]
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


class Reader:
    """Someone following the page: a shell in a folder, a second terminal for the server."""

    def __init__(self, home: Path, venv: Path, login: str) -> None:
        self.cwd = home
        self.login = login
        self.address = f"127.0.0.1:{free_port()}"
        self.server: subprocess.Popen[str] | None = None
        found = server()
        service = home / "pg_service.conf"
        service.write_text(
            "[mysite]\n"
            + "".join(f"{key}={found[key]}\n" for key in ("host", "port") if found[key] is not None)
            + f"dbname={login}\nuser={login}\n"
        )
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("WORKER_", "DATABASE", "DJANGO_", "WORKQUEUE", "PG"))
        }
        self.env.update(
            PATH=f"{venv / 'bin'}:{self.env['PATH']}",
            VIRTUAL_ENV=str(venv),
            PGSERVICEFILE=str(service),
            PYTHONUNBUFFERED="1",  # stdout and stderr in the order a terminal shows them
            COLUMNS="100",
        )

    def write(self, block: str) -> None:
        for name, code in file_parts(block):
            path = self.cwd / name
            if f"# {name} (add at the end)\n" in block:
                path.write_text(path.read_text() + "\n" + code)
            else:
                path.write_text(code)

    def run(self, command: str, shown: list[str]) -> None:
        words = shlex.split(command)
        if any(tuple(words[: len(skip)]) == skip for skip in SKIPPED):
            return
        if words[0] == "cd":
            self.cwd = self.cwd / words[1]
            return
        if words[:3] == ["python", "manage.py", "runserver"]:
            self.start_server()
            return
        done = subprocess.run(
            command.replace(PAGE_ADDRESS, self.address),
            shell=True,
            executable="/bin/bash",
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        said = [
            line.rstrip().replace(self.login, PAGE_LOGIN).replace(self.address, PAGE_ADDRESS)
            for line in done.stdout.splitlines()
        ]
        assert done.returncode == 0, f"$ {command}\n{done.stdout}"
        assert matches(shown, said), (
            f"$ {command}\nthe page shows:\n" + "\n".join(shown) + "\nit said:\n" + "\n".join(said)
        )

    def start_server(self) -> None:
        self.server = subprocess.Popen(
            ["python", "manage.py", "runserver", self.address, "--noreload"],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        status, body = get(f"http://{self.address}/healthz", self.server)
        assert status == 200, body

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.communicate(timeout=30)


def test_the_tutorial_runs_as_written_in_a_new_site(
    venv_for: VenvFor, login: str, tmp_path: Path
) -> None:
    reader = Reader(tmp_path, venv_for(DJANGO_VERSIONS[-1]), login)
    blocks = code_blocks(PAGE)
    ran = 0
    try:
        for language, block in blocks:
            if language == "console":
                for command, shown in commands(block):
                    reader.run(command, shown)
                    ran += 1
            elif language == "python":
                reader.write(block)
            elif language == "ini":
                assert block.startswith("# ~/.pg_service.conf\n"), block  # the test's own
            else:
                assert language == "sql", f"a tutorial block in {language}: decide what it does"
    finally:
        reader.stop_server()
    assert ran >= 10 and reader.server is not None, "the tutorial's commands were not found"
