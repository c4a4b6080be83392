"""The sweep's rescue against real liveness sessions: a worker whose lock no session holds has its
items handed back once the lock has been seen free for the grace, as an expired lease's are; a
worker that holds its lock, or that never took one, keeps its items."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from audit.models import AuditEntry
from tenancy.contexts import OpContext, service_context
from tests.helpers import row
from workers.liveness_lock import TAKE_LIVENESS_LOCK, TakeParams, new_key, session_params
from workers.models import RescueTurn, Worker
from workers.sweep import rescue
from workers.sweep.clock import db_now_minus
from workers.sweep.config import SweepSettings
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.models import Attempt, Status, WorkItem
from wqcore.conf import server_socket_settings

pytestmark = pytest.mark.usefixtures("committed")

SETTINGS = SweepSettings(batch=10, max_batches=2, rescue_grace_s=1.0)


def _take(worker_id: str) -> psycopg.Connection[Any]:
    """A worker's liveness session: its lock taken and its row written, as runworker does."""
    conn = psycopg.connect(**session_params(), autocommit=True)
    taken = conn.execute(
        TAKE_LIVENESS_LOCK.sql,
        TakeParams(
            new_key(), worker_id, "NOOP", "default", "host", 1, *server_socket_settings()
        )._asdict(),
    ).fetchall()
    assert taken
    return conn


@pytest.fixture
def sessions() -> Iterator[list[psycopg.Connection[Any]]]:
    opened: list[psycopg.Connection[Any]] = []
    yield opened
    for conn in opened:
        conn.close()


def _end(conn: psycopg.Connection[Any]) -> None:
    """End a liveness session, and wait until its backend has gone (and its lock with it)."""
    pid = conn.info.backend_pid
    conn.close()
    with psycopg.connect(**session_params(), autocommit=True) as probe:
        for _ in range(500):
            if not probe.execute("SELECT FROM pg_stat_activity WHERE pid = %s", [pid]).fetchall():
                return
            time.sleep(0.01)
    raise AssertionError("the session did not end")


def _claimed(ctx: OpContext, rctx, worker_id: str, n: int) -> list[WorkItem]:  # type: ignore[no-untyped-def]
    for _ in range(n):
        api.enqueue(ctx, "NOOP", {})
    return [item for _, item in claim(rctx, "default", ["NOOP"], worker_id, 30, n)]


def _nothing(rescued: rescue.Rescued) -> bool:
    """Nobody marked, forgotten or handed back (the fleet's size aside)."""
    return rescued._replace(fleet=0) == rescue.Rescued()


def _seen_free_long_ago(worker_id: str) -> None:
    """Back-date the rescue's first look (the database's clock decides the grace)."""
    Worker.objects.using("admin").filter(pk=worker_id).update(lock_lost_at=db_now_minus(5.0))


def test_a_gone_holders_items_go_back_after_the_grace_and_nothing_else_moves(
    ctx, worker_rctx, sessions
) -> None:
    gone, live, old = "host:1:gone", "host:2:live", "host:3:old"
    gone_session = _take(gone)
    sessions.append(_take(live))
    # A worker of an older release: its row has no lock.
    Worker.objects.using("admin").create(
        id=old, kind="NOOP", lane="default", host="h", pid=3, state="running"
    )
    mine = _claimed(ctx, worker_rctx, gone, 3)
    theirs = _claimed(ctx, worker_rctx, live, 1) + _claimed(ctx, worker_rctx, old, 1)
    WorkItem.objects.using("admin").filter(pk=mine[0].id).update(attempts=5)  # spent (max 5)
    runtime.cancel(ctx, mine[1].id)  # asked to cancel while claimed

    assert _nothing(rescue.run_once(worker_rctx, SETTINGS))  # every lock held
    _end(gone_session)  # the process died: its session, and its lock, with it
    first = rescue.run_once(worker_rctx, SETTINGS)
    assert (first.marked, first.holders) == (1, 0)  # seen free once: not yet
    assert {row(i.id).status for i in mine} == {Status.CLAIMED}
    _seen_free_long_ago(gone)

    second = rescue.run_once(worker_rctx, SETTINGS)
    assert (second.holders, second.requeued, second.dead_lettered, second.cancelled) == (1, 1, 1, 1)
    assert row(mine[0].id).status == Status.FAILED
    assert row(mine[0].id).last_error == "holder gone; attempts spent"
    assert row(mine[1].id).status == Status.CANCELLED
    assert (row(mine[2].id).status, row(mine[2].id).attempts) == (Status.PENDING, 1)
    assert row(mine[2].id).last_error == "holder gone"
    assert {row(i.id).status for i in theirs} == {Status.CLAIMED}
    outcomes = Attempt.objects.using("admin").filter(item_id__in=[i.id for i in mine])
    assert {(a.outcome, a.worker) for a in outcomes} == {("holder_gone", gone)}
    [entry] = AuditEntry.objects.using("admin").filter(action="work.dead_lettered")
    assert entry.subject_id == str(mine[0].id)

    # Nothing left held: the gone worker's lock is forgotten, and never read again.
    assert rescue.run_once(worker_rctx, SETTINGS).forgotten == 1
    assert Worker.objects.using("admin").get(pk=gone).lock_key is None
    assert _nothing(rescue.run_once(worker_rctx, SETTINGS))


def test_a_worker_that_took_a_new_lock_keeps_what_it_claimed_under_it(
    ctx, worker_rctx, sessions
) -> None:
    worker = "host:4:back"
    first = _take(worker)
    _end(first)  # its liveness session failed
    assert rescue.run_once(worker_rctx, SETTINGS).marked == 1
    _seen_free_long_ago(worker)
    sessions.append(_take(worker))  # it reconnected: a new key, the mark cleared
    items = _claimed(ctx, worker_rctx, worker, 2)
    assert _nothing(rescue.run_once(worker_rctx, SETTINGS))
    assert {row(i.id).status for i in items} == {Status.CLAIMED}


def test_a_worker_back_between_the_look_and_the_hand_back_keeps_its_items(
    ctx, worker_rctx, sessions
) -> None:
    """Found gone by the look, its lock taken again before the hand-back (a blip): the re-check
    beside the hand-back sees it back, and nothing it holds moves."""
    worker = "host:7:blip"
    _end(_take(worker))
    items = _claimed(ctx, worker_rctx, worker, 2)
    assert rescue.run_once(worker_rctx, SETTINGS).marked == 1
    _seen_free_long_ago(worker)
    found = rescue.find_gone(SETTINGS.rescue_grace_s)
    assert found.holders == {ctx.org_id: [worker]}
    sessions.append(_take(worker))  # it reconnected in between
    rescued = rescue._rescue(worker_rctx, SETTINGS, found)
    assert (rescued.holders, rescued.requeued, rescued.back) == (0, 0, 1)
    assert {row(i.id).status for i in items} == {Status.CLAIMED}


def test_keep_claims_names_only_the_claims_that_still_hold(ctx, worker_rctx, sessions) -> None:
    """The worker's check once its lock is back: held under its token and within its lease
    (kept); claimed again by another (a new token), or its lease run out (not kept)."""
    from workers.liveness_lock import _keep_claims
    from workqueue.fence import Fence

    items = _claimed(ctx, worker_rctx, "host:8:blip", 3)
    fences = [Fence.of(i) for i in items]
    WorkItem.objects.using("admin").filter(pk=items[1].id).update(claim_token=uuid.uuid4())
    WorkItem.objects.using("admin").filter(pk=items[2].id).update(
        lease_expires_at=db_now_minus(1.0)
    )

    async def keep() -> set[Fence]:
        conn = await psycopg.AsyncConnection.connect(**session_params(), autocommit=True)
        try:
            return await _keep_claims(conn, fences)
        finally:
            await conn.close()

    assert asyncio.run(keep()) == {fences[0]}


def test_only_what_the_holder_claimed_before_the_look_goes_back(face, ctx, worker_rctx) -> None:
    before = db_now_minus(0)
    items = _claimed(ctx, worker_rctx, "host:5:gone", 2)
    held_ctx = service_context(worker_rctx, ctx.org_id)
    assert face.requeue_held(held_ctx, ["host:5:gone"], before).requeued == 0
    assert {row(i.id).status for i in items} == {Status.CLAIMED}
    moved = face.requeue_held(held_ctx, ["host:5:gone", "x"], db_now_minus(-1))
    assert moved.requeued == 2
    assert {row(i.id).status for i in items} == {Status.PENDING}


def test_the_fleets_timers_take_turns_to_look_and_a_pass_always_looks(worker_rctx) -> None:
    """A timer's look within most of an interval of another's finds nothing, not even a gone
    worker; once the interval has passed the next timer looks; a sweep pass's step looks
    whenever it runs."""
    gone_session = _take("host:6:gone")
    _end(gone_session)
    timer = SweepSettings(batch=10, max_batches=2, rescue_grace_s=1.0, rescue_interval_s=60)
    assert rescue.run_on_timer(worker_rctx, timer).marked == 1  # the first look takes the turn
    Worker.objects.using("admin").filter(pk="host:6:gone").update(lock_lost_at=None)
    assert _nothing(rescue.run_on_timer(worker_rctx, timer))  # not its turn
    assert rescue.run_once(worker_rctx, timer).marked == 1  # a pass looks anyway
    Worker.objects.using("admin").filter(pk="host:6:gone").update(lock_lost_at=None)
    RescueTurn.objects.using("admin").update(looked_at=db_now_minus(60 * rescue.TURN_SHARE))
    assert rescue.run_on_timer(worker_rctx, timer).marked == 1  # its turn again


def test_each_worker_asks_the_less_often_the_larger_the_fleet() -> None:
    settings = SweepSettings(rescue_interval_s=0.5)

    def delays(fleet: int) -> list[float]:
        return [rescue.ask_delay_s(settings, rescue.Rescued(fleet=fleet)) for _ in range(100)]

    failed = rescue.ask_delay_s(settings, None)
    assert all(0.375 <= d <= 0.625 for d in [*delays(2), failed])  # every interval, or so
    assert all(1.5 <= d <= 2.5 for d in delays(16))  # 16 workers: 4 asks an interval
    assert all(3.0 <= d <= 5.0 for d in delays(400))  # at most every 8 intervals
    assert len(set(delays(2))) > 1  # spread, so the fleet's timers do not fall in step
