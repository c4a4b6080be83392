"""A handler's exception in a real ``runworker``: its traceback in the worker's terminal (a
pseudo-terminal), one line per event in a pipe (text), one JSON line with it in ``exc``."""

from __future__ import annotations

import json
import os
import pty
import secrets
import subprocess
import uuid

import pytest

from tenancy.contexts import OpContext
from tests.runtime.subprocess_kinds import LOGGED
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue import api
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

ARGS = [PYTHON, "manage.py", "runworker", LOGGED.name, "--once", "--metrics-port", "-1"]


def _env(**extra: str) -> dict[str, str]:
    return subprocess_env(
        handlers=True,
        WORKER_SWEEP="false",
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        **extra,
    )


def _on_a_terminal() -> str:
    """Run the worker with stderr (and stdout) on a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(ARGS, cwd=ROOT, env=_env(), stdout=follower, stderr=follower)
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
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode(errors="replace")


def _in_a_pipe(**env: str) -> str:
    done = subprocess.run(
        ARGS, cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def _fails(ctx: OpContext) -> uuid.UUID:
    item, _ = api.enqueue(ctx, LOGGED.name, {"fail": True})
    return item.id


def test_a_terminal_shows_the_handlers_traceback(ctx: OpContext) -> None:
    item = _fails(ctx)
    shown = _on_a_terminal()
    assert WorkItem.objects.using("admin").get(pk=item).status == Status.FAILED
    assert "item_dead_lettered" in shown
    assert "Traceback (most recent call last)" in shown
    assert "subprocess_kinds.py" in shown and "PermanentError" in shown


def test_a_pipe_keeps_one_line_per_event(ctx: OpContext) -> None:
    item = _fails(ctx)
    written = _in_a_pipe()
    assert WorkItem.objects.using("admin").get(pk=item).status == Status.FAILED
    [line] = [line for line in written.splitlines() if "item_dead_lettered" in line]
    assert 'error="PermanentError: no such shipment"' in line
    assert "Traceback" not in written


def test_json_keeps_the_traceback_in_its_one_line(ctx: OpContext) -> None:
    item = _fails(ctx)
    written = _in_a_pipe(LOG_FORMAT="json")
    assert WorkItem.objects.using("admin").get(pk=item).status == Status.FAILED
    events = [json.loads(line) for line in written.splitlines() if line.strip()]
    [dead] = [e for e in events if e["event"] == "item_dead_lettered"]
    assert "Traceback (most recent call last)" in dead["exc"]
    assert "subprocess_kinds.py" in dead["exc"]
