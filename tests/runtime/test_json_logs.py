"""A real ``runworker`` with ``LOG_FORMAT=json``: every line it writes is one JSON object, and
each line about an item (the worker's own and the handler's) carries the item's id, kind,
tenant, attempt and trace id; a dead letter is a WARNING with its error's first line."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import time

import pytest

from tests.helpers import back_date
from tests.runtime.subprocess_kinds import LOGGED
from tests.runtime.support import PYTHON, ROOT, count, subprocess_env
from workqueue import api
from workqueue.claim import claim
from workqueue.models import Status

pytestmark = pytest.mark.usefixtures("committed")

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def test_every_line_of_a_worker_is_json_and_item_lines_name_the_item(ctx) -> None:
    traced = dataclasses.replace(ctx, rctx=dataclasses.replace(ctx.rctx, traceparent=TRACEPARENT))
    ok, _ = api.enqueue(traced, LOGGED.name, {}, lane="json-logs")
    dead, _ = api.enqueue(traced, LOGGED.name, {"fail": True}, lane="json-logs")
    proc = subprocess.Popen(
        [
            PYTHON,
            "manage.py",
            "runworker",
            LOGGED.name,
            "--lane",
            "json-logs",
            "--metrics-port",
            "-1",
        ],
        cwd=ROOT,
        env=subprocess_env(handlers=True, LOG_FORMAT="json", WORKER_SWEEP="false"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while count(status__in=[Status.DONE, Status.FAILED], lane="json-logs") < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "the items never settled"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # each one parses
    events = {line["event"] for line in lines}
    assert {"worker_started", "worker_stopping", "worker_offline"} <= events, events
    for line in lines:
        assert {"ts", "level", "logger", "event"} <= line.keys(), line
    hello = {line["item"]: line for line in lines if line["event"] == "handler_says_hello"}
    assert hello.keys() == {str(ok.id), str(dead.id)}  # a handler's own line, from its thread
    for item in (ok, dead):
        line = hello[str(item.id)]
        assert (line["kind"], line["tenant"], line["attempt"], line["trace_id"]) == (
            LOGGED.name,
            str(ctx.org_id),
            1,
            TRACE_ID,
        )
    [letter] = [line for line in lines if line["event"] == "item_dead_lettered"]
    assert letter["level"] == "warning" and letter["item"] == str(dead.id)
    assert letter["error"] == "PermanentError: no such shipment"  # the first line only
    assert letter["trace_id"] == TRACE_ID and letter["attempt"] == 1


def test_the_sweep_writes_json_lines_too(ctx, worker_rctx) -> None:
    """``manage.py sweep --once`` with ``LOG_FORMAT=json``: an expired lease handed back is one
    JSON line naming its tenant; the human summary stays on stdout."""
    item, _ = api.enqueue(ctx, "NOOP", {}, lane="json-sweep")
    claim(worker_rctx, "json-sweep", None, "gone-host:1:aaaaaa", 30, 1)
    back_date(item.id, lease_expires_at=90)
    done = subprocess.run(
        [PYTHON, "manage.py", "sweep", "--once"],
        cwd=ROOT,
        env=subprocess_env(LOG_FORMAT="json"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # The human summary on stdout: one line per step, then how long the pass took.
    assert done.stdout.splitlines()[-1].startswith("sweep took "), done.stdout
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    [requeued] = [line for line in lines if line["event"] == "stale_requeued"]
    assert requeued["tenant"] == str(ctx.org_id) and requeued["requeued"] == 1
