"""What the browser tests share: Debian's Chromium, a free port, waiting for a server, starting
and stopping ``manage.py`` processes on the test database."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.runtime.support import PYTHON, ROOT, subprocess_env

# Debian's: bin/test installs it where it may, and says so in one line where it may not.
CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# Every browser test's marks: rows committed (the servers read them), slow, and Chromium.
MARKS = [
    pytest.mark.usefixtures("committed"),
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian's chromium is not installed: apt-get install chromium"
    ),
]
# Where the documentation shows them (git-ignored): its pictures of the admin are the browser
# tests', taken at their last run.
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "assets" / "screenshots"
PASSWORD = "correct horse battery staple"


def fresh_shots(name: str) -> Path:
    """The folder of one test's screenshots (``SHOTS/name``), emptied of its last run's."""
    shots = SHOTS / name
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("*.png"):
        old.unlink()
    return shots


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{process.args} exited: {process.stdout.read()}")  # type: ignore[union-attr]
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer in {timeout_s} s")


def start_worker(kinds: str, *args: str) -> subprocess.Popen[str]:
    """A real ``runworker`` of ``kinds`` on the test database (``args``: ``--lane``...)."""
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", kinds, "--metrics-port", "-1", *args],
        cwd=ROOT,
        env=subprocess_env(DEBUG="true", WORKER_HEARTBEAT_INTERVAL_S="0.5"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()
