"""The gauges page's minutes: the sweep's rollup of the attempts, exact against the attempts
table, each attempt counted once (also one whose transaction commits after a later one was
read), bounded rows, purged by the sweep's retention, each tenant's read under its row-level
security."""

from __future__ import annotations

import asyncio
import bisect
import math
import threading
import uuid
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.db import connections, transaction
from django.db.utils import DatabaseError

from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from tests.helpers import back_date, queue_settings
from workers.sweep import keep_minutes, roll_up_minutes
from workers.sweep.config import SweepSettings
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.maintenance import requeue_stale
from workqueue.minutes import WAIT_BOUNDS_S, quantile, read_minutes, read_rollup_place
from workqueue.models import LaneMinute
from workqueue.settle import complete, fail
from wqcore.store import aclose_async_store

pytestmark = pytest.mark.usefixtures("committed")

LANES = ["default", "fast"]
SETTINGS = SweepSettings(batch=2, max_batches=20, purge_sessions=False)


@pytest.fixture(autouse=True)
def _lanes():  # type: ignore[no-untyped-def]
    with queue_settings(LANES=LANES):
        yield


def _claim(rctx, lane: str, n: int = 1) -> list[tuple[OpContext, Any]]:  # type: ignore[no-untyped-def]
    return claim(rctx, lane, ["NOOP"], "w-1", 30, n)


def _run(ctx: OpContext, rctx, lane: str, outcomes: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Enqueue one item per outcome in ``lane`` and claim and settle each as told: "done",
    "retried" (a failure with attempts left) or "dead" (a permanent failure)."""
    for _ in outcomes:
        api.enqueue(ctx, "NOOP", {}, lane=lane)
    for outcome, (item_ctx, held) in zip(outcomes, _claim(rctx, lane, len(outcomes)), strict=True):
        if outcome == "done":
            complete(item_ctx, held)
        else:
            fail(item_ctx, held, "ValueError: no", permanent=outcome == "dead", delay_s=0)


def _expected() -> dict[tuple[datetime, uuid.UUID, str], dict[str, Any]]:
    """What the rows must say, computed here from the attempts and their items as stored (read
    as the owner): per minute of each attempt's end, tenant and lane."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            """
            SELECT a.ended_at, a.org_id, i.lane, a.outcome, i.status, a.started_at,
                   i.claimed_at, i.available_at
              FROM workqueue_attempt a JOIN workqueue_workitem i ON i.id = a.item_id
            """
        )
        attempts = cursor.fetchall()
    found: dict[tuple[datetime, uuid.UUID, str], dict[str, Any]] = defaultdict(
        lambda: {"done": 0, "failed": 0, "dead": 0, "waits": [0] * (len(WAIT_BOUNDS_S) + 1)}
    )
    for ended, org, lane, outcome, status, started, claimed, available in attempts:
        lane = lane if lane in LANES else "(undeclared)"
        key = (ended.replace(second=0, microsecond=0), org, lane)
        row = found[key]
        row["done" if outcome == "done" else "failed"] += 1
        spent = outcome in ("lease_expired", "holder_gone") and status == "failed"
        row["dead"] += outcome == "dead_lettered" or spent
        if outcome in ("done", "dead_lettered") and claimed == started and available <= started:
            waited = (started - available).total_seconds()
            row["waits"][bisect.bisect_right(WAIT_BOUNDS_S, waited)] += 1
    return dict(found)


def _rows() -> dict[tuple[datetime, uuid.UUID, str], dict[str, Any]]:
    """The rows' counts (a row that holds only a pending count, the sampling's, left out)."""
    return {
        (m.minute, m.org_id, m.lane): {
            "done": m.done,
            "failed": m.failed,
            "dead": m.dead,
            "waits": list(m.waits),
        }
        for m in LaneMinute.objects.using("admin").all()
        if m.done or m.failed
    }


def _back_date_attempts(org_id: uuid.UUID, seconds: float) -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_attempt SET ended_at = ended_at - make_interval(secs => %s),"
            " started_at = started_at - make_interval(secs => %s) WHERE org_id = %s",
            [seconds, seconds, org_id],
        )
        cursor.execute(
            "UPDATE workqueue_workitem SET claimed_at = claimed_at - make_interval(secs => %s),"
            " available_at = available_at - make_interval(secs => %s) WHERE org_id = %s",
            [seconds, seconds, org_id],
        )
        # A pending item's ready row is ordered by when it is due: it moves with it.
        cursor.execute(
            "UPDATE workqueue_ready SET available_at = available_at - make_interval(secs => %s)"
            " WHERE org_id = %s",
            [seconds, org_id],
        )


def test_the_rollup_is_exact_against_the_attempts_and_counts_each_once(
    ctx, make_ctx, worker_rctx
) -> None:
    other = make_ctx()
    _run(ctx, worker_rctx, "default", ["done"] * 5 + ["retried"] * 2 + ["dead"])
    _run(other, worker_rctx, "fast", ["done"] * 3)
    # Two leases ran out: one item with attempts left goes back, one with none is a dead letter.
    api.enqueue(ctx, "NOOP", {}, lane="fast", max_attempts=1)
    [(_, spent)] = _claim(worker_rctx, "fast")
    back_date(spent.id, lease_expires_at=60)
    api.enqueue(other, "NOOP", {}, lane="default")
    [(_, kept)] = _claim(worker_rctx, "default")
    back_date(kept.id, lease_expires_at=60)
    for tenant in (ctx, other):
        requeue_stale(tenant)
    # Minutes apart: the other tenant's attempts ended ten minutes ago.
    _back_date_attempts(other.org_id, 600)

    first = roll_up_minutes.run_once(worker_rctx, SETTINGS)
    expected = _expected()
    assert first.attempts == 5 + 2 + 1 + 3 + 1 + 1 and not first.behind
    assert _rows() == expected
    totals = Counter[str]()
    for row in expected.values():
        totals.update({k: row[k] for k in ("done", "failed", "dead")})
    assert totals == {"done": 8, "failed": 5, "dead": 2}
    # The claims that ended their item have their wait counted; the retried ones do not.
    assert sum(sum(row["waits"]) for row in expected.values()) == 8 + 1
    # Again: nothing is counted twice.
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts == 0
    assert _rows() == expected
    # More attempts add to the same minute's row.
    _run(ctx, worker_rctx, "default", ["done", "dead"])
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts == 2
    assert _rows() == _expected()


def test_an_attempt_committed_after_a_later_one_was_read_is_counted_once(ctx, worker_rctx) -> None:
    for _ in range(2):
        api.enqueue(ctx, "NOOP", {})
    [(first_ctx, first), (second_ctx, second)] = _claim(worker_rctx, "default", 2)
    holding, release, held = threading.Event(), threading.Event(), []

    def complete_and_wait() -> None:
        # Its attempt takes its id now and commits only when told: a later one commits first.
        with transaction.atomic(using="default"):
            held.append(complete(first_ctx, first))
            holding.set()
            release.wait(30)
        connections.close_all()

    late = threading.Thread(target=complete_and_wait)
    late.start()
    try:
        assert holding.wait(30)
        asyncio.run(_complete_elsewhere(second_ctx, second))
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT max(id) FROM workqueue_attempt")
            assert cursor.fetchone()[0] is not None  # the later attempt, committed
        # The first attempt's transaction is open: nothing at or past its id is final yet.
        counted = roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts
        counted += roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts
        assert counted == 0
    finally:
        release.set()
        late.join(30)
    assert held and held[0].status == "done"
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts == 2
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts == 0
    [row] = _rows().values()
    assert row["done"] == 2 and _rows() == _expected()


async def _complete_elsewhere(item_ctx: OpContext, item: Any) -> None:
    try:
        await complete.aio(item_ctx, item)
    finally:
        await aclose_async_store()


def test_rows_stay_bounded_whatever_lanes_callers_make_up(ctx, worker_rctx) -> None:
    for n in range(6):
        _run(ctx, worker_rctx, f"made-up-{n}", ["done", "done"])
    _run(ctx, worker_rctx, "default", ["done"] * 20)
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts == 32
    lanes = {lane for _, _, lane in _rows()}
    assert lanes == {"default", "(undeclared)"}
    # One row per minute, tenant and lane (the test's attempts may straddle a minute).
    assert len(_rows()) == len(_expected()) <= 4


def test_a_batch_budget_stops_the_pass_and_the_next_goes_on(ctx, worker_rctx) -> None:
    _run(ctx, worker_rctx, "default", ["done"] * 7)
    small = SweepSettings(batch=2, max_batches=2, rollup_batch=2, purge_sessions=False)
    first = roll_up_minutes.run_once(worker_rctx, small)
    assert first.attempts < 7 and first.behind
    total = first.attempts
    for _ in range(10):
        total += roll_up_minutes.run_once(worker_rctx, small).attempts
    assert total == 7 and _rows() == _expected()


def test_attempts_older_than_the_retention_are_passed_over(ctx, worker_rctx) -> None:
    _run(ctx, worker_rctx, "default", ["done", "done"])
    _back_date_attempts(ctx.org_id, 3 * 86_400)
    _run(ctx, worker_rctx, "default", ["done"])
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).attempts == 1


def test_the_pending_items_are_counted_once_a_minute(ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    for _ in range(3):
        api.enqueue(ctx, "NOOP", {})
    api.enqueue(other, "NOOP", {}, lane="fast")
    api.enqueue(other, "NOOP", {}, lane="made-up")
    assert roll_up_minutes.run_once(worker_rctx, SETTINGS).sampled
    pending = {(org, lane): m.pending for (_, org, lane), m in _models().items()}
    assert pending == {
        (ctx.org_id, "default"): 3,
        (other.org_id, "fast"): 1,
        (other.org_id, "(undeclared)"): 1,
    }
    api.enqueue(ctx, "NOOP", {})
    again = roll_up_minutes.run_once(worker_rctx, SETTINGS)
    minute = {m.minute for m in _models().values()}
    if len(minute) == 1 and not again.sampled:  # the same minute: counted at its first pass
        assert _models()[(minute.pop(), ctx.org_id, "default")].pending == 3


def _models() -> dict[tuple[datetime, uuid.UUID, str], LaneMinute]:
    return {(m.minute, m.org_id, m.lane): m for m in LaneMinute.objects.using("admin").all()}


def _partitions() -> dict[str, datetime]:
    """Each day's partition, oldest first, with when its day ends."""
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT relname, hi FROM workqueue_minutes_part ORDER BY lo")
        return dict(cursor.fetchall())


def _minute_rows(days_ago: list[int], org_id: uuid.UUID) -> None:
    with connections["admin"].cursor() as cursor:
        for days in days_ago:
            cursor.execute(
                "INSERT INTO workqueue_laneminute"
                " (minute, org_id, lane, done, failed, dead, waits, pending)"
                " VALUES (date_trunc('minute', now()) - make_interval(days => %s), %s,"
                " 'default', 1, 0, 0, array_fill(0, ARRAY[20]), 0)",
                [days, org_id],
            )


KEEP_A_WEEK = (
    "SELECT workqueue_minutes_keep_v2(now() - interval '7 days', now() + interval '2 days')"
)


@pytest.fixture
def every_day_kept():  # type: ignore[no-untyped-def]
    """Days (partitions) from a week back, before the test and again after it (a test drops
    them; partitions outlive the truncation between tests), so its minutes and the next test's
    have their day."""
    with connections["admin"].cursor() as cursor:
        cursor.execute(KEEP_A_WEEK)
    yield
    with connections["admin"].cursor() as cursor:
        cursor.execute(KEEP_A_WEEK)


def test_the_minutes_are_kept_one_partition_a_day(ctx, worker_rctx, every_day_kept) -> None:
    """The sweep makes the days ahead, writes each minute into its day's partition, and drops a
    day whole once past the retention (never its rows one by one); a day a session holds a lock
    on is left for a later pass."""
    kept = keep_minutes.run_once(worker_rctx, SETTINGS)
    parts = _partitions()
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now() + interval '2 days'")
        ahead = cursor.fetchone()[0]
    assert max(parts.values()) >= ahead, parts
    assert kept.waiting == 0
    _run(ctx, worker_rctx, "default", ["done"])
    roll_up_minutes.run_once(worker_rctx, SETTINGS)
    _minute_rows([1], ctx.org_id)  # within the retention: the step kept their days
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'workqueue_laneminute'")
        assert cursor.fetchone()[0] == "p"
        # The everyday login has no right on a day by name: it reads through the table.
        cursor.execute(
            "SELECT bool_or(has_table_privilege(%s, relname::regclass, 'SELECT'))"
            " FROM workqueue_minutes_part",
            [connections["default"].settings_dict["USER"]],
        )
        assert cursor.fetchone()[0] is False
    # A session reading the oldest day (a report) holds it: that drop waits for a later pass.
    oldest = next(iter(parts))
    params = connections["admin"].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    reader = psycopg.connect(**params, autocommit=False)
    try:
        reader.execute(f"SELECT count(*) FROM {oldest}")
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT * FROM workqueue_minutes_drop_v2(now() + interval '3 days')")
            _dropped, waiting = cursor.fetchone()
        assert waiting >= 1 and oldest in _partitions()
    finally:
        reader.rollback()
        reader.close()
    # Past the retention (every day, as a clock three days on would see them): dropped whole.
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT * FROM workqueue_minutes_drop_v2(now() + interval '3 days')")
        assert cursor.fetchone()[1] == 0
    assert _partitions() == {}
    assert LaneMinute.objects.using("admin").count() == 0
    # The next pass makes the days again: the rollup has somewhere to write.
    again = keep_minutes.run_once(worker_rctx, SETTINGS)
    assert again.made >= 3 and _partitions()
    _minute_rows([0], ctx.org_id)


def test_the_retention_drops_only_the_days_that_ended_before_it(
    ctx, worker_rctx, every_day_kept
) -> None:
    with connections["admin"].cursor() as cursor:
        # Days that began a week ago, then the step with a two-day retention.
        cursor.execute("SELECT * FROM workqueue_minutes_drop_v2(now() + interval '3 days')")
        cursor.execute(KEEP_A_WEEK)
    _minute_rows([0, 1, 4, 6], ctx.org_id)
    kept = keep_minutes.run_once(worker_rctx, SweepSettings(rollup_retention_s=2 * 86400.0))
    assert kept.dropped >= 4 and kept.waiting == 0
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT min(lo) FROM workqueue_minutes_part")
        (first,) = cursor.fetchone()
        cursor.execute("SELECT now() - interval '3 days' < %s", [first])
        assert cursor.fetchone()[0]
    # The minutes of today and yesterday stay; those of 4 and 6 days ago went with their days.
    assert LaneMinute.objects.using("admin").count() == 2


def test_a_tenant_reads_its_own_minutes_only(ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    _run(ctx, worker_rctx, "default", ["done", "done", "dead"])
    _run(other, worker_rctx, "default", ["done"])
    roll_up_minutes.run_once(worker_rctx, SETTINGS)
    everyone = read_minutes(60, 60)
    mine = read_minutes(60, 60, org_id=ctx.org_id)
    theirs = read_minutes(60, 60, org_id=other.org_id)
    assert sum(s.done for s in everyone.total()) == 3
    assert [sum(s.done for s in m.total()) for m in (mine, theirs)] == [2, 1]
    assert sum(s.dead for s in mine.total()) == 1 and sum(s.dead for s in theirs.total()) == 0
    assert len(mine.starts) == 60 and mine.starts == everyone.starts
    # Under its row-level security, the everyday login reads its tenant's rows, and the
    # rollup's place not at all (it belongs to no tenant).
    with tenant_scope(other.org_id, using="default"), connections["default"].cursor() as cursor:
        cursor.execute("SELECT org_id FROM workqueue_laneminute")
        assert {r[0] for r in cursor.fetchall()} == {other.org_id}
    with pytest.raises(DatabaseError, match="permission denied"):
        with transaction.atomic(using="default"), connections["default"].cursor() as cursor:
            cursor.execute("SELECT * FROM workqueue_rollupstate")
    marked_at, now = read_rollup_place()
    assert marked_at is not None and marked_at <= now


def test_the_day_reads_in_spans_of_ten_minutes_and_waits_add_up(ctx, worker_rctx) -> None:
    _run(ctx, worker_rctx, "default", ["done"] * 4)
    _back_date_attempts(ctx.org_id, 3600)
    _run(ctx, worker_rctx, "fast", ["done"] * 2)
    roll_up_minutes.run_once(worker_rctx, SETTINGS)
    day = read_minutes(600, 144)
    assert len(day.starts) == 144 and day.starts[1] - day.starts[0] == timedelta(minutes=10)
    assert set(day.lanes) == {"default", "fast"}
    assert sum(s.done for s in day.total("default")) == 4
    assert sum(s.done for s in day.total()) == 6
    waits = [0] * (len(WAIT_BOUNDS_S) + 1)
    for row in _expected().values():
        waits = [a + b for a, b in zip(waits, row["waits"], strict=True)]
    summed = [0] * len(waits)
    for span in day.total():
        summed = [a + b for a, b in zip(summed, span.waits, strict=True)]
    assert summed == waits and sum(waits) == 6
    hour = read_minutes(60, 60)
    assert sum(s.done for s in hour.total()) == 2  # the others ended an hour ago


def test_a_percentile_is_the_bound_that_share_of_claims_waited_at_most() -> None:
    waits = [0] * (len(WAIT_BOUNDS_S) + 1)
    assert quantile(waits, 0.5) is None
    waits[0], waits[3], waits[-1] = 50, 45, 5  # <10 ms, 50-100 ms, a day or more
    assert quantile(waits, 0.5) == 0.01
    assert quantile(waits, 0.51) == 0.1
    assert quantile(waits, 0.95) == 0.1
    assert quantile(waits, 0.96) == WAIT_BOUNDS_S[-1]
    assert math.isclose(sum(waits) * 0.95, 95)
    assert runtime.quantile is quantile


def test_the_partitioning_migration_keeps_every_minute_both_ways(ctx, every_day_kept) -> None:
    """Migration 0025 unapplied puts every day's minutes back into one plain table with its
    rights and row-level security, and applied again makes that table the days before."""
    from django.db.migrations.executor import MigrationExecutor

    def migrate(target: tuple[str, str] | None) -> None:
        executor = MigrationExecutor(connections["admin"])
        executor.loader.build_graph()
        executor.migrate([target] if target else executor.loader.graph.leaf_nodes())

    with connections["admin"].cursor() as cursor:
        cursor.execute(KEEP_A_WEEK)
    _minute_rows([0, 1, 3], ctx.org_id)
    migrate(("workqueue", "0024_history_share_v2"))
    try:
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT relkind, relrowsecurity, relforcerowsecurity FROM pg_class"
                " WHERE relname = 'workqueue_laneminute'"
            )
            assert cursor.fetchone() == ("r", True, True)
        assert LaneMinute.objects.using("admin").count() == 3
        # The everyday login reads its tenant's minutes there, as before.
        with tenant_scope(ctx.org_id):
            assert LaneMinute.objects.count() == 3
    finally:
        migrate(None)
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE relname = 'workqueue_laneminute'")
        assert cursor.fetchone() == ("p",)
    assert LaneMinute.objects.using("admin").count() == 3
    with tenant_scope(ctx.org_id):
        assert LaneMinute.objects.count() == 3
