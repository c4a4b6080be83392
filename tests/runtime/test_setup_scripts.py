"""bin/test and bin/run on a malformed or unreachable DATABASE_URL: the same one line from
both, no traceback, nothing started."""

from __future__ import annotations

import os
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
