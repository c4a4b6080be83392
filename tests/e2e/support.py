"""What the browser tests share: Debian's Chromium, a free port, waiting for a server, stopping
a process, and where the screenshots go (``tests/e2e/screenshots/``, git-ignored; the
documentation takes its pictures from there)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

# Debian's: bin/test installs it where it may, and says so in one line where it may not.
CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SHOTS = Path(__file__).with_name("screenshots")
PASSWORD = "correct horse battery staple"


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


def stop_process(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()
