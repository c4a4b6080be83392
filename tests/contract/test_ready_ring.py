"""The ready ring (workqueue/ready.py): every pending item has its ready row, and only pending
items do; the rotation promotes what comes due, rings what a release before the ring left
without one, and empties a grown slot even while a REPEATABLE READ snapshot is held open."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings

from tests.helpers import back_date, row
from workqueue import api, runtime, settle
from workqueue.claim import claim
from workqueue.models import Status

pytestmark = pytest.mark.usefixtures("committed")


def _admin(sql: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
    with connections["admin"].cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchall() if cursor.description else []


def _unringed() -> list[uuid.UUID]:
    """Pending items without a ready row that matches them (the claim could not find them)."""
    return [
        r[0]
        for r in _admin(
            "SELECT w.id FROM workqueue_workitem w WHERE w.status = 'pending' AND NOT EXISTS ("
            " SELECT FROM workqueue_ready r WHERE r.id = w.id AND r.lane = w.lane"
            " AND r.org_id = w.org_id AND r.priority = w.priority"
            " AND r.available_at = w.available_at AND r.kind = w.kind)"
        )
    ]


def _left_behind() -> list[uuid.UUID]:
    """Ready rows whose item is not pending (the claim passes over them)."""
    return [
        r[0]
        for r in _admin(
            "SELECT r.id FROM workqueue_ready r WHERE NOT EXISTS ("
            " SELECT FROM workqueue_workitem w WHERE w.id = r.id AND w.status = 'pending')"
        )
    ]


def _slots() -> dict[uuid.UUID, int]:
    return {r[0]: r[1] for r in _admin("SELECT id, slot FROM workqueue_ready")}  # type: ignore[misc]


def _ring_holds_exactly_the_pending_items() -> None:
    assert _unringed() == []
    assert _left_behind() == []


def test_each_way_into_pending_writes_a_ready_row_and_each_way_out_takes_it(
    ctx, worker_rctx
) -> None:
    one, _ = api.enqueue(ctx, "NOOP", {})
    many = api.enqueue_many(ctx, [api.NewItem("NOOP", {}) for _ in range(200)])
    keyed = api.enqueue_many(ctx, [api.NewItem("NOOP", {}, idempotency_key="k1")])
    _ring_holds_exactly_the_pending_items()
    assert len(_slots()) == 202

    claimed = claim(worker_rctx, "default", None, "w1", 30, 300)
    assert len(claimed) == 202
    _ring_holds_exactly_the_pending_items()
    assert _slots() == {}

    # Back to pending by every holder's way: a failure retried, a deferral, a release.
    (c1, i1), (c2, i2), (c3, i3) = claimed[:3]
    settle.fail(c1, i1, "boom")
    settle.defer(c2, i2, 0)
    settle.release(c3, i3, "shutting down")
    _ring_holds_exactly_the_pending_items()
    assert set(_slots()) == {i1.id, i2.id, i3.id}

    # Out of pending otherwise than by a claim: a cancel, a discard.
    api.cancel(ctx, i2.id)
    _ring_holds_exactly_the_pending_items()
    assert set(_slots()) == {i1.id, i3.id}
    assert one.id and many and keyed


def test_a_stale_claim_handed_back_and_a_dead_letter_requeued_get_their_rows(
    ctx, worker_rctx
) -> None:
    item, _ = api.enqueue(ctx, "NOOP", {})
    claim(worker_rctx, "default", None, "w1", 30, 1)
    back_date(item.id, lease_expires_at=90)
    assert runtime.requeue_stale(ctx).requeued == 1
    _ring_holds_exactly_the_pending_items()
    assert set(_slots()) == {item.id}


def test_a_workflow_step_gets_its_row_when_its_parent_completes(ctx, worker_rctx) -> None:
    flow = api.Workflow()
    first = flow.step("NOOP", {})
    then = flow.step("NOOP", {}, after=[first])
    declared = api.enqueue_workflow(ctx, flow)
    assert set(_slots()) == {declared[first]}  # the waiting step has none
    _ring_holds_exactly_the_pending_items()
    ((held_ctx, held),) = claim(worker_rctx, "default", None, "w1", 30, 5)
    settle.complete(held_ctx, held)
    assert row(declared[then]).status == Status.PENDING
    assert set(_slots()) == {declared[then]}
    _ring_holds_exactly_the_pending_items()


def test_an_item_due_beyond_the_rings_reach_waits_in_slot_0_until_promoted(
    ctx, worker_rctx
) -> None:
    later, _ = api.enqueue(ctx, "NOOP", {}, available_at=_db_now() + timedelta(seconds=60))
    assert _slots() == {later.id: 0}
    back_date(later.id, available_at=5)  # now due: its row is in the ring
    assert _slots()[later.id] > 0
    _admin("UPDATE workqueue_ready SET slot = 0 WHERE id = %s", [later.id])  # as if not promoted
    assert claim(worker_rctx, "default", None, "w1", 30, 1) == []
    turned = runtime.rotate_ready()
    assert (turned.turn, turned.promoted) == (True, 1)
    assert [i.id for _, i in claim(worker_rctx, "default", None, "w1", 30, 1)] == [later.id]


def test_a_pending_item_left_without_a_row_is_ringed_by_the_rotation(ctx, worker_rctx) -> None:
    item, _ = api.enqueue(ctx, "NOOP", {})
    # As a worker of the release before the ring hands an item back: pending, no ready row.
    _admin("DELETE FROM workqueue_ready WHERE id = %s", [item.id])
    _admin(
        "UPDATE workqueue_workitem SET updated_at = now() + interval '1 ms' WHERE id = %s",
        [item.id],
    )
    assert claim(worker_rctx, "default", None, "w1", 30, 1) == []
    assert runtime.rotate_ready().adopted == 1
    assert runtime.rotate_ready().adopted == 0  # ringed once
    _ring_holds_exactly_the_pending_items()
    assert [i.id for _, i in claim(worker_rctx, "default", None, "w1", 30, 1)] == [item.id]


def test_a_row_left_behind_is_never_picked_and_a_turn_drops_it(ctx, worker_rctx) -> None:
    gone, _ = api.enqueue(ctx, "NOOP", {})
    kept, _ = api.enqueue(ctx, "NOOP", {})
    # As a worker of the release before the ring claims an item: claimed, its row still there.
    _admin("UPDATE workqueue_workitem SET status = 'cancelled' WHERE id = %s", [gone.id])
    assert _left_behind() == [gone.id]
    claimed = claim(worker_rctx, "default", None, "w1", 30, 1)
    assert [i.id for _, i in claimed] == [kept.id]  # the batch of one was not spent on it
    with _ring_settings(READY_COMPACT_MIN_BYTES=0):
        for _ in range(4):  # each slot of the ring comes up for emptying within four seconds
            runtime.rotate_ready()
            if not _left_behind():
                break
            _wait_next_second()
    assert _left_behind() == []


def _ring_settings(**values: int) -> override_settings:
    return override_settings(WORKQUEUE={**getattr(settings, "WORKQUEUE", {}), **values})


def _db_now():  # type: ignore[no-untyped-def]
    return _admin("SELECT now()")[0][0]


def _wait_next_second() -> None:
    _admin(
        "SELECT pg_sleep(1.0 - mod(extract(milliseconds FROM clock_timestamp())::int, 1000)"
        " / 1000.0)"
    )


@pytest.fixture
def held_snapshot() -> Iterator[None]:
    """A REPEATABLE READ transaction with its snapshot taken and held open (a report), on a
    connection of its own: VACUUM can remove nothing any claim made dead meanwhile."""
    conn = connections.create_connection("admin")
    try:
        with conn.cursor() as cursor:
            cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("SELECT count(*) FROM workqueue_tenantshare")
        yield
    finally:
        conn.close()


def test_a_grown_slot_is_emptied_beside_a_held_snapshot(
    ctx, worker_rctx, held_snapshot: None
) -> None:
    for _ in range(6):
        api.enqueue_many(ctx, [api.NewItem("NOOP", {}) for _ in range(500)])
        while claim(worker_rctx, "default", None, "w1", 30, 500):
            pass
    waiting, _ = api.enqueue(ctx, "NOOP", {})
    slot = _slots()[waiting.id]
    grown = _admin(f"SELECT pg_relation_size('workqueue_ready_{slot}')")[0][0]
    assert grown > 0  # 3,000 claimed rows' dead versions, kept for the held snapshot
    _wait_next_second()
    _wait_next_second()  # the slot is neither this second's nor the last's
    with _ring_settings(READY_COMPACT_MIN_BYTES=0):
        turned = runtime.rotate_ready()
    assert turned.emptied >= 1 and turned.moved >= 1
    assert _admin(f"SELECT pg_relation_size('workqueue_ready_{slot}')")[0][0] == 0
    _ring_holds_exactly_the_pending_items()  # the item still waiting moved, not lost
    assert [i.id for _, i in claim(worker_rctx, "default", None, "w1", 30, 5)] == [waiting.id]


def test_a_backlog_is_left_in_its_slot_and_a_locked_slot_for_the_next_turn(ctx) -> None:
    api.enqueue_many(ctx, [api.NewItem("NOOP", {}) for _ in range(50)])
    (slot,) = set(_slots().values())
    _wait_next_second()
    _wait_next_second()
    with _ring_settings(READY_COMPACT_MIN_BYTES=0, READY_COMPACT_MAX_ROWS=10):
        turned = runtime.rotate_ready()
    assert (turned.emptied, turned.held) == (0, 1)
    assert set(_slots().values()) == {slot}

    locked, done = threading.Event(), threading.Event()

    def hold() -> None:
        conn = connections.create_connection("admin")
        try:
            with conn.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(f"LOCK TABLE workqueue_ready_{slot} IN ACCESS SHARE MODE")
                locked.set()
                done.wait(10)
        finally:
            conn.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        locked.wait(10)
        with _ring_settings(READY_COMPACT_MIN_BYTES=0):
            turned = runtime.rotate_ready()
        assert turned.emptied == 0 and turned.held >= 1  # waited READY_LOCK_TIMEOUT_MS, no more
    finally:
        done.set()
        holder.join()
    _ring_holds_exactly_the_pending_items()


def test_a_backlog_its_claims_left_mostly_dead_is_emptied_beside_a_held_snapshot(
    ctx, worker_rctx, held_snapshot: None
) -> None:
    # 50 items in one slot, 30 of them claimed: a backlog of 20 past READY_COMPACT_MAX_ROWS (10),
    # but 30 dead rows (kept for the snapshot) that every claim of the slot walks.
    api.enqueue_many(ctx, [api.NewItem("NOOP", {}) for _ in range(50)])
    (slot,) = set(_slots().values())
    assert len(claim(worker_rctx, "default", None, "w1", 30, 30)) == 30
    partition = f"workqueue_ready_{slot}"
    deadline = time.monotonic() + 30  # the claims' counts reach the statistics within seconds
    while _admin(f"SELECT pg_stat_get_dead_tuples('{partition}'::regclass)")[0][0] < 30:
        assert time.monotonic() < deadline, "the statistics never counted the claims' rows"
        time.sleep(0.2)
    # The slot is neither this second's nor the last's, nor the next second's last: two on.
    two_on = (slot + 1) % 4 + 1
    while _admin("SELECT 1 + mod(floor(extract(epoch FROM now()))::int, 4)")[0][0] != two_on:
        _wait_next_second()
    with _ring_settings(READY_COMPACT_MIN_BYTES=0, READY_COMPACT_MAX_ROWS=10):
        turned = runtime.rotate_ready()
    assert (turned.emptied, turned.moved) == (1, 20)
    assert _admin(f"SELECT pg_relation_size('{partition}')")[0][0] == 0
    _ring_holds_exactly_the_pending_items()  # the 20 still waiting moved, not lost
    assert len(claim(worker_rctx, "default", None, "w1", 30, 50)) == 20


def test_one_rotator_at_a_time() -> None:
    conn = connections.create_connection("admin")
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                "INSERT INTO workqueue_mutex (name) VALUES ('workqueue.ready')"
                " ON CONFLICT DO NOTHING"
            )
            cursor.execute("BEGIN")
            cursor.execute("SELECT FROM workqueue_mutex WHERE name = 'workqueue.ready' FOR UPDATE")
            assert runtime.rotate_ready().turn is False
            # Ended here, not by the close: a closed session's backend may still hold the lock
            # for a moment after the client let go.
            cursor.execute("ROLLBACK")
    finally:
        conn.close()
    assert runtime.rotate_ready().turn is True
