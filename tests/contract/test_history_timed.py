"""History by a time of their own: the API's stored answers and the relayed outbox rows move out
of their tables a minute after they are finished, read as before (a retried key still gets its
answer), and their children go whole once past their own retention; what is in flight stays."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connections

from outbox.emit import emit
from outbox.relay import relay_pending
from tests.contract.test_history import DAY_S, _db_now, _drop_every_span, _one
from tests.helpers import back_date_outbox
from workers.sweep import move_history as move_step
from workers.sweep.config import SweepSettings
from workqueue import idempotency
from workqueue.history import drop_history, keep_history, move_timed_history

KEYS = "workqueue_storedresponse"
OUTBOX = "workqueue_outbox_outboxrow"


@pytest.fixture(autouse=True)
def no_spans(committed: None):  # type: ignore[no-untyped-def]
    """Each test starts and ends with no history (spans outlive the truncation between tests)."""
    _drop_every_span()
    keep_history(DAY_S, DAY_S)
    yield
    _drop_every_span()


def _where(table: str, row_id: uuid.UUID) -> tuple[int, int]:
    """How many rows with this id are in the table itself, and in its children."""
    hot = _one(f"SELECT count(*) FROM ONLY {table} WHERE id = %s", [row_id])[0]
    every = _one(f"SELECT count(*) FROM {table} WHERE id = %s", [row_id])[0]
    return hot, every - hot


def _answer(ctx, key: str, body: dict[str, int]) -> uuid.UUID:  # type: ignore[no-untyped-def]
    claim = idempotency.claim_key(ctx, key, "print-1")
    assert isinstance(claim, uuid.UUID)
    idempotency.store_response(ctx, claim, 201, body)
    return claim


def _age_keys(seconds: float) -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE ONLY workqueue_storedresponse"
            " SET created_at = now() - make_interval(secs => %s)",
            [seconds],
        )


def _move(table: str):  # type: ignore[no-untyped-def]
    return move_timed_history(table, _db_now() - timedelta(days=1), 60.0)


def test_an_answered_key_moves_and_a_retry_still_gets_its_answer(ctx, make_ctx) -> None:
    answered = _answer(ctx, "order:1", {"id": 1})
    # In flight (claimed, not answered yet): stays in the table with its unique key.
    in_flight = idempotency.claim_key(ctx, "order:2", "print-1")
    assert isinstance(in_flight, uuid.UUID)
    _age_keys(120)
    moved = _move(KEYS)
    assert moved.moved == 1 and not moved.unkept
    assert _where(KEYS, answered) == (0, 1)
    assert _where(KEYS, in_flight) == (1, 0)
    # The retry finds the answer in history: no second claim, the same answer.
    again = idempotency.claim_key(ctx, "order:1", "print-1")
    assert again == idempotency.Stored(201, {"id": 1})
    with pytest.raises(idempotency.KeyReused):
        idempotency.claim_key(ctx, "order:1", "print-2")
    assert _one("SELECT count(*) FROM workqueue_storedresponse WHERE key = 'order:1'") == (1,)
    # Another tenant's key of the same name is its own.
    other = make_ctx()
    assert isinstance(idempotency.claim_key(other, "order:1", "print-1"), uuid.UUID)


def test_relayed_outbox_rows_move_and_pending_ones_stay(ctx, worker_rctx) -> None:
    relayed = emit(ctx, "work.NOOP", {"n": 1})
    assert relay_pending(worker_rctx).enqueued == 1
    waiting = emit(ctx, "work.NOOP", {"n": 2})
    back_date_outbox(relayed, relayed_at=120)
    moved = _move(OUTBOX)
    assert moved.moved == 1
    assert _where(OUTBOX, relayed) == (0, 1)
    assert _where(OUTBOX, waiting) == (1, 0)
    # The relay still finds what is pending (the children hold relayed rows only).
    assert relay_pending(worker_rctx).enqueued == 1
    assert _where(OUTBOX, waiting) == (1, 0)


def test_each_timed_table_goes_after_its_own_retention(ctx) -> None:
    """A span's child of a timed table is dropped once past that table's retention, while the
    span's items stay until theirs."""
    _answer(ctx, "order:1", {"id": 1})
    _age_keys(120)
    assert _move(KEYS).moved == 1
    assert _one(f"SELECT count(*) FROM {KEYS}") == (1,)
    # Retention of the keys: minus four days (every span kept is past it); the items': a week.
    dropped = drop_history(7 * DAY_S, {KEYS: -4 * DAY_S})
    assert dropped.dropped >= 1 and dropped.waiting == 0
    assert _one(f"SELECT count(*) FROM {KEYS}") == (0,)
    children = _one("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", [KEYS])[0]
    assert children == 0
    assert _one("SELECT count(*) FROM workqueue_history_span")[0] > 0
    # The keeper makes them again for the spans it keeps.
    keep_history(DAY_S, DAY_S)
    assert _one("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", [KEYS])[0] > 0


def test_a_child_whose_span_went_with_the_release_before_is_dropped(ctx) -> None:
    """A sweep of the release before drops spans with v1, which knows no timed table: the
    timed children it leaves are dropped by the next drop."""
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT * FROM workqueue_history_drop_v1('infinity')")
    assert _one("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", [KEYS])[0] > 0
    drop_history(7 * DAY_S)
    assert _one("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass", [KEYS]) == (0,)


def test_the_sweep_step_moves_the_timed_tables_kept_no_longer_than_the_items(
    ctx, worker_rctx
) -> None:
    move_step._since.clear()
    _answer(ctx, "order:1", {"id": 1})
    _age_keys(120)
    kept = move_step.run_once(worker_rctx, SweepSettings())
    assert kept is not None and kept.timed == 1
    # A table kept longer than the items stays in its table (and its purge).
    assert move_step.timed_retentions(SweepSettings(outbox_retention_s=8 * DAY_S)) == {
        KEYS: float(DAY_S)
    }
