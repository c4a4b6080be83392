"""History: done items move out of the hot table into a span's child table, with their attempts,
and every reader reads them as before; a key or id in history stays taken; other tenants see
none of it; a span past the retention is dropped whole, unless a session is reading it; the
statements that ask for another status never read history."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import connections, transaction
from django.db.utils import ProgrammingError

from tests.helpers import back_date, row
from workers.sweep import move_history as move_step
from workers.sweep.config import SweepSettings
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.exceptions import NotFound
from workqueue.fence import Fence
from workqueue.history import drop_history, keep_history, move_history, read_history
from workqueue.models import Status, WorkItem
from workqueue.settle import complete_many

DAY_S = 86400.0


def _drop_every_span() -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT * FROM workqueue_history_drop_v2('infinity', '{}', '{}')")


@pytest.fixture(autouse=True)
def no_spans(committed: None):  # type: ignore[no-untyped-def]
    """Each test starts and ends with no history (spans outlive the truncation between tests)."""
    _drop_every_span()
    yield
    _drop_every_span()


def _db_now():  # type: ignore[no-untyped-def]
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def _one(sql: str, params: list[object] | None = None):  # type: ignore[no-untyped-def]
    with connections["admin"].cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()


def _hot(ids: list[uuid.UUID]) -> int:
    return _one(
        "SELECT count(*) FROM ONLY workqueue_workitem WHERE id = ANY(%s)", [[str(i) for i in ids]]
    )[0]


def _in_history(ids: list[uuid.UUID]) -> int:
    return _one(
        "SELECT count(*) FROM workqueue_workitem WHERE id = ANY(%s)"
        " AND tableoid <> 'workqueue_workitem'::regclass",
        [[str(i) for i in ids]],
    )[0]


def _done(ctx, worker_rctx, n: int, **fields):  # type: ignore[no-untyped-def]
    """``n`` items done with results ``{"n": i}``, ended two minutes ago."""
    items = [api.enqueue(ctx, "NOOP", {"n": i}, lane="history", **fields)[0] for i in range(n)]
    held = [item for _, item in claim(worker_rctx, "history", None, "w1", 30, n)]
    complete_many([Fence.of(h) for h in held], [f'{{"n": {i}}}' for i in range(n)])
    for item in items:
        back_date(item.id, updated_at=120)
    return items


def _move(worker_rctx, after_s: float = 60.0):  # type: ignore[no-untyped-def]
    keep_history(DAY_S, DAY_S)
    return move_history(_db_now() - timedelta(days=1), after_s)


def test_done_items_move_with_their_attempts_and_read_as_before(ctx, worker_rctx) -> None:
    items = _done(ctx, worker_rctx, 3)
    ids = [i.id for i in items]
    fresh = _done(ctx, worker_rctx, 1)[0]
    back_date(fresh.id, updated_at=5)  # ended 5 s ago: stays hot
    moved = _move(worker_rctx)
    assert moved.moved == 3 and not moved.unkept
    assert (_hot(ids), _in_history(ids)) == (0, 3)
    assert _hot([fresh.id]) == 1
    # Its attempts moved with it: none left in the hot attempts table, all readable.
    assert _one(
        "SELECT count(*) FROM ONLY workqueue_attempt WHERE item_id = ANY(%s)",
        [[str(i) for i in ids]],
    ) == (0,)
    assert _one(
        "SELECT count(*) FROM workqueue_attempt WHERE item_id = ANY(%s)", [[str(i) for i in ids]]
    ) == (3,)
    # Every reader reads it through the item table: results, status, the ORM (the admin's).
    assert api.result_of(ctx, ids[1]) == {"n": 1}
    assert api.results_of(ctx, ids) == {ids[0]: {"n": 0}, ids[1]: {"n": 1}, ids[2]: {"n": 2}}
    status = api.status_of(ctx, ids[2])
    assert (status.status, status.attempts, status.result) == (Status.DONE, 1, {"n": 2})
    assert row(ids[0]).status == Status.DONE
    assert WorkItem.objects.using("admin").filter(id__in=ids, status=Status.DONE).count() == 3
    # A second move finds nothing more to move.
    assert move_history(moved.through, 60.0).moved == 0


def test_a_key_or_an_id_in_history_stays_taken(ctx, worker_rctx) -> None:
    [keyed] = _done(ctx, worker_rctx, 1, idempotency_key="order:7")
    [plain] = _done(ctx, worker_rctx, 1)
    assert _move(worker_rctx).moved == 2
    again, outcome = api.enqueue(ctx, "NOOP", {"n": 9}, idempotency_key="order:7")
    assert again.id == keyed.id and outcome == api.Outcome.KEY_EXISTS
    same, _ = api.enqueue(ctx, "NOOP", {"n": 9}, id=plain.id)
    assert same.id == plain.id and same.status == Status.DONE
    results = api.enqueue_many(
        ctx,
        [api.NewItem("NOOP", {}, idempotency_key="order:7"), api.NewItem("NOOP", {}, id=plain.id)],
    )
    assert [(i, o) for i, o in results] == [
        (keyed.id, api.Outcome.KEY_EXISTS),
        (plain.id, api.Outcome.ID_EXISTS),
    ]
    assert _one("SELECT count(*) FROM workqueue_workitem WHERE idempotency_key = 'order:7'") == (1,)
    assert _one("SELECT count(*) FROM workqueue_workitem WHERE id = %s", [plain.id]) == (1,)


def test_another_tenant_sees_nothing_of_history(ctx, make_ctx, worker_rctx) -> None:
    [item] = _done(ctx, worker_rctx, 1)
    assert _move(worker_rctx).moved == 1
    other = make_ctx()
    with pytest.raises(NotFound):
        api.status_of(other, item.id)
    assert api.results_of(other, [item.id]) == {}
    # By the child's own name the everyday login reaches nothing: not a row to read, none to
    # write outside the hot table's unique key (another tenant's item id, say).
    [stamp] = [s.stamp for s in read_history() if s.lo <= _db_now() - timedelta(minutes=2) < s.hi]
    for attempt in (
        f"SELECT count(*) FROM workqueue_workitem_done_{stamp}",
        f"INSERT INTO workqueue_workitem_done_{stamp} SELECT * FROM workqueue_workitem LIMIT 0",
    ):
        with pytest.raises(ProgrammingError, match="permission denied"):
            with transaction.atomic(using="default"), connections["default"].cursor() as cursor:
                cursor.execute("SELECT set_config('app.org_id', %s, true)", [str(other.org_id)])
                cursor.execute(attempt)


def test_a_workflows_items_stay_in_the_hot_table(ctx, worker_rctx) -> None:
    [item] = _done(ctx, worker_rctx, 1)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_workitem SET workflow_id = %s WHERE id = %s", [uuid.uuid4(), item.id]
        )
    assert _move(worker_rctx).moved == 0
    assert _hot([item.id]) == 1


def test_a_span_past_the_retention_is_dropped_whole_unless_read(ctx, worker_rctx) -> None:
    # A span of a minute, three minutes ago, holding an item that ended then.
    [item] = _done(ctx, worker_rctx, 1)
    back_date(item.id, updated_at=150)
    keep_history(300.0, 60.0)
    assert move_history(_db_now() - timedelta(minutes=5), 60.0).moved == 1
    [span] = [s for s in read_history() if s.lo <= _db_now() - timedelta(seconds=150) < s.hi]
    # A session reading it (a report): the drop leaves it for a later pass, waiting for nothing.
    params = connections["admin"].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    reader = psycopg.connect(**params, autocommit=False)
    try:
        reader.execute(f"SELECT count(*) FROM workqueue_workitem_done_{span.stamp}")
        dropped = drop_history(60.0)
        assert dropped.waiting >= 1
        assert _in_history([item.id]) == 1
    finally:
        reader.rollback()
        reader.close()
    dropped = drop_history(60.0)
    assert dropped.dropped >= 1
    assert _one("SELECT count(*) FROM workqueue_workitem WHERE id = %s", [item.id]) == (0,)
    assert _one("SELECT count(*) FROM workqueue_attempt WHERE item_id = %s", [item.id]) == (0,)
    assert _one("SELECT to_regclass(%s)", [f"workqueue_workitem_done_{span.stamp}"]) == (None,)
    assert span.stamp not in {s.stamp for s in read_history()}


def test_statements_that_ask_for_another_status_leave_history_out(ctx, worker_rctx) -> None:
    _done(ctx, worker_rctx, 1)
    assert _move(worker_rctx).moved == 1
    with connections["admin"].cursor() as cursor:
        for sql in (
            "SELECT count(*) FROM workqueue_workitem WHERE status = 'pending'",
            "SELECT id FROM workqueue_workitem WHERE status = 'claimed' AND attempts > 1",
            "SELECT id FROM workqueue_workitem WHERE status IN ('failed', 'discarded')",
        ):
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(line for (line,) in cursor.fetchall())
            assert "_done_" not in plan, plan
        cursor.execute(
            "EXPLAIN " + runtime.READ_GAUGES.sql.replace("%(lanes)s", "ARRAY['default']")
        )
        assert "_done_" not in "\n".join(line for (line,) in cursor.fetchall())
        # The enqueue's questions to history (an id taken, a key taken) have an index in every
        # span (asked of the planner with scans of whole tables priced out).
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_bitmapscan = off")
        try:
            spans = len(read_history())
            for question, index in (
                ("h.id = %s", "_id_idx"),
                ("h.org_id = %s AND h.idempotency_key = 'k'", "idempotency_key"),
            ):
                asked = f"SELECT FROM workqueue_workitem h WHERE h.status = 'done' AND {question}"
                cursor.execute(f"EXPLAIN {asked}", [uuid.uuid4()])
                plan = "\n".join(line for (line,) in cursor.fetchall())
                children = [line for line in plan.splitlines() if "_done_" in line]
                assert len(children) == spans and all(index in c for c in children), plan
        finally:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")


def test_the_sweep_step_keeps_moves_and_drops(ctx, worker_rctx) -> None:
    items = _done(ctx, worker_rctx, 2)
    settings = SweepSettings(history_after_s=60.0)
    move_step._since.clear()
    kept = move_step.run_once(worker_rctx, settings)
    assert kept is not None and kept.moved == 2
    assert _in_history([i.id for i in items]) == 2
    # The spans ahead are made: the next hour's child exists before anything ends in it.
    assert any(s.lo > _db_now() for s in read_history())
    assert move_step.run_once(worker_rctx, SweepSettings(history=False)) is None


def test_the_sweep_steps_move_keeps_up_past_one_round_within_its_time(ctx, worker_rctx) -> None:
    # A round is SWEEP_BATCH x SWEEP_MAX_BATCHES rows (here 2 x 3): with more waiting to move,
    # the step goes on round after round while they come back full, within SWEEP_INTERVAL_S.
    items = _done(ctx, worker_rctx, 15)
    ids = [i.id for i in items]
    move_step._since.clear()
    kept = move_step.run_once(
        worker_rctx, SweepSettings(history_after_s=60.0, batch=2, max_batches=3, interval_s=60)
    )
    assert kept is not None and kept.moved == 15
    assert (_hot(ids), _in_history(ids)) == (0, 15)


def test_the_sweep_steps_move_stops_at_its_time_with_rounds_left(ctx, worker_rctx) -> None:
    # Past SWEEP_INTERVAL_S the step ends after the round it is in; the next pass goes on.
    items = _done(ctx, worker_rctx, 15)
    ids = [i.id for i in items]
    move_step._since.clear()
    settings = SweepSettings(history_after_s=60.0, batch=2, max_batches=3, interval_s=1e-6)
    kept = move_step.run_once(worker_rctx, settings)
    assert kept is not None and kept.moved == 6
    assert (_hot(ids), _in_history(ids)) == (9, 6)
    moved = [kept.moved]
    while moved[-1]:
        again = move_step.run_once(worker_rctx, settings)
        assert again is not None
        moved.append(again.moved)
    assert moved == [6, 6, 3, 0] and _hot(ids) == 0


def test_a_task_record_follows_its_item_and_goes_when_it_is_purged(ctx, worker_rctx) -> None:
    moved_item, purged_item = _done(ctx, worker_rctx, 2)
    with connections["admin"].cursor() as cursor:
        for item in (moved_item, purged_item):
            cursor.execute(
                "INSERT INTO workqueue_tasks_taskrecord (item_id, org_id, worker_ids, errors)"
                " VALUES (%s, %s, '[]', '[]')",
                [item.id, ctx.org_id],
            )
        # One of them is older than the retention: purged in the hot table, not moved.
        cursor.execute(
            "UPDATE workqueue_workitem SET updated_at = now() - interval '8 days' WHERE id = %s",
            [purged_item.id],
        )
    assert _move(worker_rctx).moved == 1
    assert _one(
        "SELECT count(*) FROM ONLY workqueue_tasks_taskrecord WHERE item_id = %s", [moved_item.id]
    ) == (0,)
    assert _one(
        "SELECT count(*) FROM workqueue_tasks_taskrecord WHERE item_id = %s", [moved_item.id]
    ) == (1,)
    assert runtime.purge_items(worker_rctx, _db_now() - timedelta(days=7)) == 1
    assert _one(
        "SELECT count(*) FROM workqueue_tasks_taskrecord WHERE item_id = %s", [purged_item.id]
    ) == (0,)
    assert _one(
        "SELECT count(*) FROM workqueue_tasks_taskrecord WHERE item_id = %s", [moved_item.id]
    ) == (1,)
    # Dropped with its span.
    assert drop_history(-2 * DAY_S).dropped >= 1
    assert _one(
        "SELECT count(*) FROM workqueue_tasks_taskrecord WHERE item_id = %s", [moved_item.id]
    ) == (0,)
