"""The operator's long commands show how far they got on a terminal, and stay quiet in scripts:
``manage.py queue cancel|requeue`` and ``sweep --once`` run as real processes, their stderr a
pseudo-terminal (what an operator's shell gives them) or a pipe (what a script or cron gives),
with ``--json`` or without."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from collections.abc import Iterator

import pytest

from tests.helpers import many_dead
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workers.sweep.sweeper import STEPS
from workqueue import api
from workqueue.models import WorkItem
from wqcore.terminal import CLEAR_TO_END

pytestmark = pytest.mark.usefixtures("committed")


def _run(*args: str, terminal: bool) -> tuple[str, str]:
    """``manage.py <args>``: its stdout, and what its stderr showed (a pseudo-terminal's screen
    output, or a pipe's)."""
    if not terminal:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr
    screen, tty = pty.openpty()
    process = subprocess.Popen(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=tty,
        text=True,
    )
    os.close(tty)
    shown = b"".join(_read_all(screen))
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, shown
    return out, shown.decode()


def _read_all(fd: int) -> Iterator[bytes]:
    try:
        while chunk := os.read(fd, 65536):
            yield chunk
    except OSError:  # the other end closed: Linux says EIO
        pass
    finally:
        os.close(fd)


def _lines(shown: str) -> list[str]:
    """The progress lines drawn, in order: a carriage return, the text, a clear to the line's
    end (the log's lines, on stderr too, are neither; the terminal ends them with \\r\\n)."""
    drawn = [part.split(CLEAR_TO_END)[0] for part in shown.split("\r") if CLEAR_TO_END in part]
    return [line for line in drawn if line]


def _quiet(err: str) -> bool:
    """Nothing drawn: no carriage return but a terminal's line ends, no clearing (the log may
    still say what it did)."""
    return re.search("\r(?!\n)", err) is None and CLEAR_TO_END not in err


def test_a_bulk_cancel_shows_its_batches_on_a_terminal_and_nothing_in_a_script(ctx) -> None:
    for start in range(0, 3000, 1000):
        api.enqueue_many(ctx, [api.NewItem("NOOP", {"n": i}) for i in range(start, start + 1000)])
    out, shown = _run("queue", "cancel", "--kind", "NOOP", "--batch", "500", terminal=True)
    lines = _lines(shown)
    assert lines and all(line.startswith("cancel NOOP: ") for line in lines), shown
    assert lines[0].startswith("cancel NOOP: 500 cancelled, 0 running asked to stop (1 batch")
    assert f"\r{CLEAR_TO_END}" in shown  # wiped at the end: the result starts on a clean line
    assert "cancelled=3000" in out and "finished" in out
    for start in range(0, 1000, 1000):
        api.enqueue_many(ctx, [api.NewItem("NOOP", {"n": i}) for i in range(start, start + 1000)])
    out, err = _run("queue", "cancel", "--kind", "NOOP", terminal=False)
    assert _quiet(err) and "cancelled=1000" in out
    api.enqueue(ctx, "NOOP", {})
    out, shown = _run("queue", "cancel", "--kind", "NOOP", "--json", terminal=True)
    assert _quiet(shown) and json.loads(out) == {
        "batches": 1,
        "cancelled": 1,
        "finished": True,
        "requested": 0,
    }
    assert WorkItem.objects.using("admin").filter(status="cancelled").count() == 4001


def test_a_requeue_by_filter_counts_up_to_what_matched(ctx) -> None:
    many_dead(ctx.org_id, 1200, error="PermanentError: gone")
    out, shown = _run("queue", "requeue", "--kind", "NOOP", terminal=True)
    lines = _lines(shown)
    assert lines and all(" of 1,200 dead letter(s) (" in line for line in lines), shown
    assert "requeue: done for 1200 item(s)" in out and "so far" not in out
    many_dead(ctx.org_id, 10, error="PermanentError: gone")
    out, err = _run("queue", "discard", "--kind", "NOOP", "--json", terminal=False)
    assert _quiet(err) and json.loads(out)["changed"] == 10


def test_a_sweep_pass_names_each_step_on_a_terminal_only() -> None:
    out, shown = _run("sweep", "--once", terminal=True)
    lines = _lines(shown)
    assert lines[0] == f"sweep: step 1 of {len(STEPS)}, rescue", shown
    assert "roll_up_minutes" in shown, shown
    assert "sweep took" in out
    out, shown = _run("sweep", "--once", "--json", terminal=True)
    assert _quiet(shown) and json.loads(out)["skipped"] is False
    out, err = _run("sweep", "--once", terminal=False)
    assert _quiet(err) and "sweep took" in out
