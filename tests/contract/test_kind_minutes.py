"""The minutes per kind: the oldest due item's wait per tenant, lane and kind, sampled at a
minute's first sweep from the ready ring, and each attempt's run time, rolled up once; read per
lane and kind across tenants or under one tenant's row-level security; dropped by day with the
lanes' minutes."""

from __future__ import annotations

import pytest
from django.db import connections

from tests.contract.test_minutes import KEEP_A_WEEK
from tests.helpers import queue_settings
from workers.sweep import keep_minutes, roll_up_minutes
from workers.sweep.config import SweepSettings
from workqueue import api
from workqueue.claim import claim
from workqueue.minutes import WAIT_BOUNDS_S, quantile, read_kind_minutes
from workqueue.models import KindMinute
from workqueue.settle import complete, fail

pytestmark = pytest.mark.usefixtures("committed")

SETTINGS = SweepSettings(batch=2, max_batches=20, purge_sessions=False)


@pytest.fixture(autouse=True)
def _lanes():  # type: ignore[no-untyped-def]
    with queue_settings(LANES=["default", "fast"]):
        yield


def _ran(ctx, rctx, lane: str, seconds: list[float], fails: int = 0) -> None:  # type: ignore[no-untyped-def]
    """Items of ``lane`` claimed and settled, each attempt back-dated to have run ``seconds``
    (the first ``fails`` of them failed and retried)."""
    for _ in seconds:
        api.enqueue(ctx, "NOOP", {}, lane=lane)
    held = claim(rctx, lane, ["NOOP"], "w-1", 30, len(seconds))
    for n, ((item_ctx, item), s) in enumerate(zip(held, seconds, strict=True)):
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "UPDATE workqueue_workitem SET claimed_at = now() - make_interval(secs => %s)"
                " WHERE id = %s",
                [s, item.id],
            )
        item.claimed_at = None
        if n < fails:
            fail(item_ctx, item, "ValueError: no", delay_s=0)
        else:
            complete(item_ctx, item)


def test_each_attempts_run_time_is_counted_once_per_kind(ctx, worker_rctx) -> None:
    _ran(ctx, worker_rctx, "default", [0.2, 0.2, 3.0, 40.0], fails=1)
    roll_up_minutes.run_once(worker_rctx, SETTINGS)
    roll_up_minutes.run_once(worker_rctx, SETTINGS)  # again: nothing counted twice
    rows = list(KindMinute.objects.using("admin").filter(kind="NOOP", lane="default"))
    runs = [sum(col) for col in zip(*(r.runs for r in rows), strict=True)]
    assert sum(runs) == 4 and len(runs) == len(WAIT_BOUNDS_S) + 1
    read = read_kind_minutes(60, 60)
    spans = read.kinds[("default", "NOOP")]
    summed = [sum(col) for col in zip(*(s.runs for s in spans), strict=True)]
    assert summed == runs
    assert quantile(summed, 0.5) == 0.25 and quantile(summed, 0.95) == 60.0


def test_the_oldest_due_item_of_each_kind_is_sampled_per_minute(ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    old, _ = api.enqueue(ctx, "NOOP", {})
    api.enqueue(ctx, "NOOP", {})
    api.enqueue(other, "NOOP", {}, lane="fast")
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_ready SET available_at = now() - interval '90 seconds' WHERE id = %s",
            [old.id],
        )
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).sampled
    oldest = {
        (m.org_id, m.lane, m.kind): m.oldest_wait_s
        for m in KindMinute.objects.using("admin").exclude(oldest_wait_s=None)
    }
    assert set(oldest) == {(ctx.org_id, "default", "NOOP"), (other.org_id, "fast", "NOOP")}
    assert 89 <= oldest[(ctx.org_id, "default", "NOOP")] < 600
    assert oldest[(other.org_id, "fast", "NOOP")] < 60
    # Across tenants, and one tenant's own (row-level security).
    everyone = read_kind_minutes(60, 60)
    assert max(s.oldest_wait_s or 0 for s in everyone.kinds[("default", "NOOP")]) >= 89
    theirs = read_kind_minutes(60, 60, org_id=other.org_id)
    assert set(theirs.kinds) == {("fast", "NOOP")}


def test_the_kinds_minutes_go_with_the_lanes_days(ctx, worker_rctx) -> None:
    """Each day of the lanes' minutes has its partition of the kinds' minutes, and the two go
    together once the day is past the retention."""
    keep_minutes.run_once(worker_rctx, SETTINGS)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'workqueue_kindminute'::regclass"
        )
        kinds = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM workqueue_minutes_part")
        assert kinds == cursor.fetchone()[0] > 0
        cursor.execute(
            "INSERT INTO workqueue_kindminute (minute, org_id, lane, kind, oldest_wait_s, runs)"
            " VALUES (date_trunc('minute', now()), %s, 'default', 'NOOP', 5,"
            " array_fill(0, ARRAY[20]))",
            [ctx.org_id],
        )
        # Past the retention (every day, as a clock three days on would see them).
        cursor.execute("SELECT * FROM workqueue_minutes_drop_v2(now() + interval '3 days')")
        assert cursor.fetchone()[1] == 0
        cursor.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'workqueue_kindminute'::regclass"
        )
        assert cursor.fetchone()[0] == 0
    assert KindMinute.objects.using("admin").count() == 0
    # Made again at the next pass (and the week back the other tests' minutes may fall in).
    assert keep_minutes.run_once(worker_rctx, SETTINGS).made >= 3
    with connections["admin"].cursor() as cursor:
        cursor.execute(KEEP_A_WEEK)
