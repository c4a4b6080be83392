"""The claim of a worker woken from idle (issue 22): its first due item alone, by the lighter
statement, in the card's order across tenants; every control holds; a tenant's cap keeps the
fair claim; the claim after it is fair again."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.helpers import back_date, queue_settings, statements
from workqueue import api, claim
from workqueue.models import Status, TenantShare, WorkItem
from workqueue.pauses import pause, resume
from wqcore.statements import GENERIC_PLAN

OPERATOR = "operator-7"


@pytest.fixture(autouse=True)
def _fresh_caps():  # type: ignore[no-untyped-def]
    claim.forget_caps()
    yield
    claim.forget_caps()


def _woken(face, rctx, limit: int = 10, worker: str = "w1"):  # type: ignore[no-untyped-def]
    return face.claim(rctx, "default", ["NOOP"], worker, 30, limit, woken=True)


def test_a_woken_claim_takes_the_first_due_item_alone(face, ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    old, _ = face.enqueue(ctx, "NOOP", {"n": 1})
    urgent, _ = face.enqueue(other, "NOOP", {"n": 2}, priority=5)
    later, _ = face.enqueue(other, "NOOP", {"n": 3})
    back_date(old.id, available_at=60)
    [(item_ctx, item)] = _woken(face, worker_rctx)
    # Priority first, whatever its tenant, under its own tenant's context and a fresh token.
    assert item.id == urgent.id and item_ctx.org_id == other.org_id
    assert item.status == Status.CLAIMED and item.attempts == 1 and item.claim_token
    # The next claim is the fair one: it takes the rest.
    rest = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    assert {i.id for _, i in rest} == {old.id, later.id}


def test_a_woken_claim_of_an_empty_lane_takes_nothing(face, ctx, worker_rctx) -> None:
    assert _woken(face, worker_rctx) == []


def test_a_woken_claim_is_one_statement(ctx, worker_rctx, monkeypatch) -> None:
    # caps and rate limits read and kept
    assert claim.claim(worker_rctx, "default", None, "w1", 30, 1) == []
    monkeypatch.setattr(claim, "CAPS_CACHE_S", float("inf"))
    monkeypatch.setattr(claim, "RATE_LIMITS_CACHE_S", float("inf"))
    api.enqueue(ctx, "NOOP", {})
    with statements("default", "system") as sent:
        assert len(claim.claim(worker_rctx, "default", None, "w1", 30, 10, woken=True)) == 1
    assert sent == [GENERIC_PLAN, claim.CLAIM_ONE.native_sql]


def test_a_woken_claim_leaves_a_paused_lane_and_kind(face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    pause(OPERATOR, "default", "NOOP")
    assert _woken(face, worker_rctx) == []
    resume(OPERATOR, "default", "NOOP")
    pause(OPERATOR, "default")
    assert _woken(face, worker_rctx) == []
    resume(OPERATOR, "default")
    assert len(_woken(face, worker_rctx)) == 1


def test_a_woken_claim_waits_behind_a_held_concurrency_key(face, ctx, worker_rctx) -> None:
    first, _ = face.enqueue(ctx, "NOOP", {"n": 1}, concurrency_key="shipment:42")
    second, _ = face.enqueue(ctx, "NOOP", {"n": 2}, concurrency_key="shipment:42")
    [(_, held)] = _woken(face, worker_rctx)
    assert held.id == first.id
    assert _woken(face, worker_rctx, worker="w2") == []
    assert WorkItem.objects.using("admin").get(id=second.id).status == Status.PENDING


def test_a_tenant_cap_keeps_the_fair_claim_when_woken(face, ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    TenantShare.objects.using("admin").create(org_id=ctx.org_id, max_in_flight=1)
    for n in range(3):
        face.enqueue(ctx, "NOOP", {"n": n})
    face.enqueue(other, "NOOP", {})
    woken = _woken(face, worker_rctx)
    # The fair claim, counting the cap: one of the capped tenant's, and the other's too.
    assert Counter(i.org_id for _, i in woken) == {ctx.org_id: 1, other.org_id: 1}
    assert _woken(face, worker_rctx) == []


@queue_settings(MAX_IN_FLIGHT=1)
def test_the_default_tenant_cap_keeps_the_fair_claim_when_woken(face, ctx, worker_rctx) -> None:
    for n in range(3):
        face.enqueue(ctx, "NOOP", {"n": n})
    assert len(_woken(face, worker_rctx)) == 1
    assert _woken(face, worker_rctx) == []


@queue_settings(FAIR_CLAIM=False)
def test_with_fairness_off_a_woken_claim_is_still_one_item(face, ctx, worker_rctx) -> None:
    for n in range(3):
        face.enqueue(ctx, "NOOP", {"n": n})
    assert len(_woken(face, worker_rctx)) == 1
    assert len(face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)) == 2


def _woken_statement(worker_rctx) -> tuple[str, int]:  # type: ignore[no-untyped-def]
    """The statement a woken claim ran, and how many items it took."""
    with statements("default", "system") as sent:
        took = claim.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10, woken=True)
    return sent[-1], len(took)


def test_a_woken_claim_counts_a_lane_cap_in_effect(ctx, worker_rctx) -> None:
    """The woken claim's own statement counts nothing: while a lane's cap holds, the claim of
    one item that counts it runs instead."""
    for n in range(2):
        api.enqueue(ctx, "NOOP", {"n": n})
    assert _woken_statement(worker_rctx) == (claim.CLAIM_ONE.native_sql, 1)
    with queue_settings(LANE_CAPS={"default": 1}):
        # The lane holds one already: its cap leaves no room.
        assert _woken_statement(worker_rctx) == (claim.CLAIM_OLDEST_FIRST.native_sql, 0)
    assert _woken_statement(worker_rctx) == (claim.CLAIM_ONE.native_sql, 1)


def test_a_woken_claim_holds_a_rate_limit_set(ctx, worker_rctx) -> None:
    from workqueue.rate_limits import clear_rate_limit, set_rate_limit

    for n in range(3):
        api.enqueue(ctx, "NOOP", {"n": n})
    set_rate_limit(OPERATOR, "kind", "NOOP", "1/h", burst=1)
    try:
        limited = claim.CLAIM_OLDEST_FIRST_LIMITED.native_sql
        assert _woken_statement(worker_rctx) == (limited, 1)
        assert _woken_statement(worker_rctx) == (limited, 0)  # the hour's one is spent
    finally:
        clear_rate_limit(OPERATOR, "kind", "NOOP")
    assert _woken_statement(worker_rctx) == (claim.CLAIM_ONE.native_sql, 1)


def test_a_woken_claim_holds_a_limit_another_process_set_just_now(face, ctx, worker_rctx) -> None:
    """The woken claim reads the controls in its own statement: a limit set by another process a
    moment ago holds at once, whatever this process last read (no cache between)."""
    from workqueue.rate_limits import clear_rate_limit, set_rate_limit

    assert _woken_statement(worker_rctx) == (claim.CLAIM_ONE.native_sql, 0)  # none set, read now
    for n in range(3):
        api.enqueue(ctx, "NOOP", {"n": n})
    set_rate_limit(OPERATOR, "kind", "NOOP", "1/h", burst=1)
    # As if another process had set it: this one still believes, freshly, that none is set.
    claim._rate_limits.update(set=False, read_at=time.monotonic())
    try:
        assert len(_woken(face, worker_rctx)) == 1
        assert _woken(face, worker_rctx) == []  # the hour's one is spent
    finally:
        clear_rate_limit(OPERATOR, "kind", "NOOP")
