"""bin/test and bin/run on a malformed or unreachable DATABASE_URL: the same one line from
both, no traceback, nothing started."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from tests.runtime.support import ROOT


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(script: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("DATABASE_URL")}
    env.update(DATABASE_URL=url, PORT=str(_free_port()), WORKER_METRICS_PORT=str(_free_port()))
    return subprocess.run(
        [str(ROOT / script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgres://app@[oops/workqueue", "DATABASE_URL is not a valid URL"),
        ("mysql://app@localhost/workqueue", "DATABASE_URL must be a PostgreSQL URL"),
        ("postgres://app@127.0.0.1:1/workqueue", "cannot reach PostgreSQL as the owner"),
    ],
)
def test_a_bad_database_url_stops_both_scripts_with_the_same_one_line(url: str, says: str) -> None:
    answers = {script: _run(script, url) for script in ("bin/test", "bin/run")}
    for script, done in answers.items():
        assert done.returncode == 2, (script, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], lines
        assert "Traceback" not in done.stdout + done.stderr
    assert answers["bin/test"].stderr == answers["bin/run"].stderr


def test_a_second_bin_run_says_so_in_one_line_and_touches_nothing(tmp_path) -> None:
    """A bin/run already up (its pid file names a live bin/run process): the second one stops
    before the database, the migrations and the demo password."""
    pidfile = ROOT / ".run.pid"
    if pidfile.exists():
        pytest.skip("a real bin/run is up in this checkout")
    standin = subprocess.Popen(["bash", "-c", "exec -a bin/run sleep 60"])
    try:
        pidfile.write_text(f"{standin.pid}\n")
        password = ROOT / ".demo-password"
        before = password.read_text() if password.exists() else None
        done = _run("bin/run", "postgres://app@127.0.0.1:1/never-reached")
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"bin/run is already running (pid {standin.pid})"
        )
        assert (password.read_text() if password.exists() else None) == before
        assert pidfile.read_text().strip() == str(standin.pid)
    finally:
        pidfile.unlink(missing_ok=True)
        standin.kill()
        standin.wait()


def _tools(tmp_path, present: tuple[str, ...], **env: str) -> subprocess.CompletedProcess[str]:
    """bin/test's set-up of its system packages, on a PATH that holds ``present`` (stand-ins)
    and no apt-get: nothing can be installed."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "dirname").symlink_to(shutil.which("dirname"))
    for name in present:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    hidden = {"chromium", "pgbouncer"} - set(present)
    if any(shutil.which(name, path="/usr/sbin:/sbin") for name in hidden):
        pytest.skip("a package this test hides is installed in /usr/sbin or /sbin")
    return subprocess.run(
        ["/bin/bash", "-c", f"source {ROOT / 'bin/_setup.sh'} && ensure_test_tools"],
        env={"PATH": str(folder), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_bin_test_says_in_one_line_which_tests_skip_for_a_package_it_cannot_install(
    tmp_path,
) -> None:
    done = _tools(tmp_path, present=("pgbouncer",))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "chromium is not installed, so the browser test is skipped: apt-get install chromium"
    ]
    assert done.stderr == ""


def test_bin_test_is_quiet_when_every_package_is_there(tmp_path) -> None:
    done = _tools(tmp_path, present=("chromium", "pgbouncer"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_ci_stops_when_a_package_cannot_be_installed(tmp_path) -> None:
    done = _tools(tmp_path, present=("pgbouncer",), TEST_TOOLS="required")
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line == (
        "error: chromium is not installed and could not be (TEST_TOOLS=required): "
        "apt-get install chromium"
    )


def test_a_wrong_test_tools_is_one_line(tmp_path) -> None:
    done = _tools(tmp_path, present=("chromium", "pgbouncer"), TEST_TOOLS="maybe")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: TEST_TOOLS must be install, skip or required (got 'maybe')"
    ]
