"""The attempt a claim spends survives PostgreSQL crashing the moment the claim returns.

The chaos run restarts the server while items run, but its handlers' own commits flush the
write-ahead log often enough to hide an asynchronous claim; here nothing else writes, so the
claim's own commit is all that stands between the attempt and the crash (``pg_ctl restart -m
immediate``: no shutdown checkpoint, no flush). With ``WORKQUEUE_CLAIM_DURABLE=false`` the
claims come back unclaimed with their attempts forgotten; with the durable default, never.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from project.embedded import pg_ctl
from tenancy.contexts import OpContext
from tests import summary
from tests.helpers import row
from workqueue import api
from workqueue.claim import claim
from workqueue.settle import complete

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("committed")]

ROUNDS = 3


def _restart_immediately(pgdata: Path) -> None:
    code = pg_ctl(pgdata, "restart", "-m", "immediate", "-w", "-t", "60", "-l", f"{pgdata}/log")
    assert code == 0, "pg_ctl restart -m immediate failed"
    connections.close_all()


def test_a_claimed_attempt_survives_an_immediate_restart(ctx: OpContext, worker_rctx) -> None:
    if settings.EMBEDDED_PGDATA is None:
        summary.state("restart", "restart: skipped (DATABASE_URL names a server not ours)")
        pytest.skip("DATABASE_URL names a server this test cannot restart")
    assert getattr(settings, "WORKQUEUE_CLAIM_DURABLE", True), "the durable claim is the default"
    pgdata = Path(settings.EMBEDDED_PGDATA)
    kept = 0
    for _ in range(ROUNDS):
        items = [api.enqueue(ctx, "NOOP", {"n": n})[0] for n in range(5)]
        # Let the enqueues reach the disk first: only the claim's own commit is on trial.
        with connections["admin"].cursor() as cursor:
            cursor.execute("CHECKPOINT")
        claimed = claim(worker_rctx, "default", ["NOOP"], "crash-test", 30, limit=5)
        assert len(claimed) == 5
        _restart_immediately(pgdata)
        after = [row(item.id) for item in items]
        assert [(i.status, i.attempts) for i in after] == [("claimed", 1)] * 5
        kept += len(after)
        for item_ctx, item in claimed:
            complete(item_ctx, item)
    summary.state(
        "restart",
        f"restart: {kept}/{kept} claims and their attempts kept across {ROUNDS} immediate"
        " restarts right after the claim (durable claim commit)",
    )
