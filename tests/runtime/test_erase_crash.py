"""A real ``manage.py queue erase`` killed with SIGKILL mid-erase: what it committed stays
erased, nothing of another tenant changed, and running it again finishes with nothing left."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time

from django.core.management import call_command
from django.db import connections

from tests.helpers import many_dead
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue.pauses import SITE_ORG_ID

ITEMS = 20_000


def _one(statement: str, params: list[object]) -> int:
    with connections["admin"].cursor() as cursor:
        cursor.execute(statement, params)
        return int(cursor.fetchone()[0])


def _items(org_id: object) -> int:
    return _one("SELECT count(*) FROM workqueue_workitem WHERE org_id = %s", [org_id])


def test_an_erase_killed_midway_goes_on_when_run_again(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    many_dead(ctx.org_id, ITEMS)
    many_dead(other.org_id, 500)
    process = subprocess.Popen(
        [PYTHON, "manage.py", "queue", "erase", "--tenant", str(ctx.org_id), "--batch", "50"],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while _items(ctx.org_id) == ITEMS and process.poll() is None:
            assert time.monotonic() < deadline, "the erase deleted nothing in two minutes"
            time.sleep(0.01)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        _, err = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL, err
    left = _items(ctx.org_id)
    assert 0 < left < ITEMS  # killed midway: some batches committed, the rest still there
    assert _items(other.org_id) == 500

    out = io.StringIO()
    call_command("queue", "erase", "--tenant", str(ctx.org_id), stdout=out)
    assert "nothing of it is left" in out.getvalue()
    assert _items(ctx.org_id) == 0 and _items(other.org_id) == 500
    # Two runs began (the killed one and this one), one finished.
    started = _one(
        "SELECT count(*) FROM workqueue_audit_auditentry WHERE org_id = %s AND action = %s",
        [SITE_ORG_ID, "queue.erase_started"],
    )
    finished = _one(
        "SELECT count(*) FROM workqueue_audit_auditentry WHERE org_id = %s AND action = %s",
        [SITE_ORG_ID, "queue.erase_finished"],
    )
    assert (started, finished) == (2, 1)
