"""The claim and the holder's writes: the claim token is the fence."""

from __future__ import annotations

import math
import time
import uuid

import pytest
from django.db import connections

from tenancy.contexts import SYSTEM_ACTOR, OpContext, Role
from tenancy.models import Membership
from tests.factories import MembershipFactory
from tests.helpers import back_date, row, statements
from workqueue import api, claim
from workqueue.claim import fail_orphaned
from workqueue.exceptions import Conflict
from workqueue.fence import Fence
from workqueue.models import Status, WorkItem
from wqcore.statements import GENERIC_PLAN


def _db_now():
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_a_claimed_item_is_not_claimed_again(face, ctx: OpContext, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    [(_item_ctx, held)] = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    assert held.id == item.id and held.claimed_by == "w1" and held.attempts == 1
    assert held.status == Status.CLAIMED and held.claim_token is not None
    assert held.updated_by == SYSTEM_ACTOR
    assert face.claim(worker_rctx, "default", ["NOOP"], "w2", 30, 10) == []


def test_the_claim_returns_the_enqueuers_context_naming_the_request(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    [(item_ctx, _)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert (item_ctx.org_id, item_ctx.user_id, item_ctx.role) == (
        ctx.org_id,
        ctx.user_id,
        Role.MEMBER,
    )
    assert item_ctx.caused_by_request_id == ctx.request_id == item.request_id
    assert item_ctx.rctx is worker_rctx


def test_work_of_a_departed_member_runs_as_the_tenants_service(face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    Membership.objects.using("admin").filter(user_id=ctx.user_id).delete()
    [(item_ctx, _)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert (item_ctx.user_id, item_ctx.role) == (SYSTEM_ACTOR, Role.SERVICE)


def test_the_lease_is_set_by_the_database_clock(face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    before = _db_now()
    [(_, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    lease = (held.lease_expires_at - before).total_seconds()
    assert 29 < lease < 31


def test_claim_order_is_priority_then_age_and_skips_what_is_not_due(face, ctx, worker_rctx) -> None:
    old, _ = face.enqueue(ctx, "NOOP", {"n": 1})
    new, _ = face.enqueue(ctx, "NOOP", {"n": 2})
    urgent, _ = face.enqueue(ctx, "NOOP", {"n": 3}, priority=5)
    later, _ = face.enqueue(ctx, "NOOP", {"n": 4})
    back_date(old.id, available_at=60)
    back_date(later.id, available_at=-60)  # due in a minute
    _other_lane, _ = face.enqueue(ctx, "NOOP", {"n": 5}, lane="bulk")
    _other_kind, _ = face.enqueue(
        ctx, "NOTIFY_SHIPMENT", {"shipment_id": str(old.id), "version": 1}
    )
    claimed = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    assert [item.id for _, item in claimed] == [urgent.id, old.id, new.id]


def test_claiming_a_batch_costs_one_statement(ctx, worker_rctx, monkeypatch) -> None:
    # Whether caps and rate limits are in effect is read once per CAPS_CACHE_S and
    # RATE_LIMITS_CACHE_S (statements of their own): read them now and keep the readings, so
    # the claims counted here are the claims alone.
    claim.forget_caps()
    claim.forget_rate_limits()
    assert claim.claim(worker_rctx, "default", None, "w1", 30, 1) == []
    monkeypatch.setattr(claim, "CAPS_CACHE_S", float("inf"))
    monkeypatch.setattr(claim, "RATE_LIMITS_CACHE_S", float("inf"))
    for _ in range(20):
        api.enqueue(ctx, "NOOP", {})
    with statements("default", "system") as sent:
        assert len(claim.claim(worker_rctx, "default", None, "w1", 30, 20)) == 20
    # the claim returns every item's context lookup with its row; the plan setting goes before
    # it in the same pipeline (one round trip)
    assert sent == [GENERIC_PLAN, claim.CLAIM.native_sql]
    with statements("default", "system") as sent:
        assert claim.claim(worker_rctx, "default", None, "w1", 30, 20) == []
    assert sent == [GENERIC_PLAN, claim.CLAIM.native_sql]


def test_the_claims_context_lookup_agrees_with_claim_context(
    face, ctx, make_ctx, worker_rctx
) -> None:
    from tenancy.exceptions import NotFound
    from tenancy.models import Org
    from tenancy.services import claim_context, service_context

    departed = make_ctx(Org.objects.using("admin").get(pk=ctx.org_id))
    gone = make_ctx()
    face.enqueue(ctx, "NOOP", {"n": 1})
    face.enqueue(departed, "NOOP", {"n": 2})
    face.enqueue(service_context(ctx.rctx, ctx.org_id), "NOOP", {"n": 3})
    face.enqueue(gone, "NOOP", {"n": 4})
    Membership.objects.using("admin").filter(user_id=departed.user_id).delete()
    Org.objects.using("admin").get(pk=gone.org_id).mark_gone()
    claimed = face.claim(worker_rctx, "default", None, "w1", 30, 10)
    assert sorted(item.payload["n"] for _, item in claimed) == [1, 2, 3]
    for item_ctx, item in claimed:
        expected = claim_context(worker_rctx, item.org_id, item.created_by, item.request_id)
        assert item_ctx == expected
    with pytest.raises(NotFound):
        claim_context(worker_rctx, gone.org_id, gone.user_id, None)


def test_complete_needs_the_current_token(face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    done = face.complete(item_ctx, held)
    assert done.status == Status.DONE and done.updated_by == SYSTEM_ACTOR
    with pytest.raises(Conflict):
        face.complete(item_ctx, held)


def test_a_completion_after_the_lease_passed_and_another_claim_is_refused(
    face, ctx, worker_rctx
) -> None:
    face.enqueue(ctx, "NOOP", {})
    [(first_ctx, first)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    back_date(first.id, lease_expires_at=5)
    face.requeue_stale(first_ctx)
    [(_, second)] = face.claim(worker_rctx, "default", None, "w2", 30, 1)
    with pytest.raises(Conflict):
        face.complete(first_ctx, first)
    assert row(first.id).claim_token == second.claim_token
    assert row(first.id).status == Status.CLAIMED


def test_the_token_of_an_earlier_claim_by_the_same_worker_is_refused(
    face, ctx, worker_rctx
) -> None:
    face.enqueue(ctx, "NOOP", {})
    [(item_ctx, first)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    face.release(item_ctx, first, "shutting down")
    [(_, second)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert second.claimed_by == first.claimed_by and second.claim_token != first.claim_token
    for write in (
        lambda: face.complete(item_ctx, first),
        lambda: face.fail(item_ctx, first, "boom"),
        lambda: face.defer(item_ctx, first, 10),
        lambda: face.release(item_ctx, first, "x"),
        lambda: face.extend_lease(item_ctx, first, 60),
    ):
        with pytest.raises(Conflict):
            write()
    stored = row(first.id)
    assert (stored.status, stored.claim_token, stored.attempts) == (
        Status.CLAIMED,
        second.claim_token,
        1,
    )


def test_defer_and_release_give_the_attempt_back(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    deferred = face.defer(item_ctx, held, 120)
    assert (deferred.status, deferred.attempts, deferred.claim_token) == (Status.PENDING, 0, None)
    assert 119 < (deferred.available_at - deferred.updated_at).total_seconds() < 121
    assert face.claim(worker_rctx, "default", None, "w1", 30, 1) == []
    back_date(item.id, available_at=1)
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    released = face.release(item_ctx, held, "worker shutting down")
    assert (released.status, released.attempts, released.last_error) == (
        Status.PENDING,
        0,
        "worker shutting down",
    )
    assert released.available_at <= _db_now()


def test_extend_lease_pushes_the_lease_from_now(face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 5, 1)
    renewed = face.extend_lease(item_ctx, held, 300)
    assert 299 < (renewed.lease_expires_at - _db_now()).total_seconds() < 301


def test_fail_retries_with_a_growing_delay_then_dead_letters(face, ctx, worker_rctx) -> None:
    from audit.models import AuditEntry

    item, _ = face.enqueue(ctx, "NOOP", {})  # NOOP allows 3 attempts
    delays = []
    for attempt in (1, 2):
        [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
        assert held.attempts == attempt
        retried = face.fail(item_ctx, held, f"boom {attempt}")
        assert retried.status == Status.PENDING and retried.last_error == f"boom {attempt}"
        delays.append((retried.available_at - retried.updated_at).total_seconds())
        back_date(item.id, available_at=1)
    assert 0 < delays[0] < delays[1]
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    dead = face.fail(item_ctx, held, "boom 3")
    assert (dead.status, dead.attempts, dead.claim_token) == (Status.FAILED, 3, None)
    entry = AuditEntry.objects.using("admin").get(subject_id=str(item.id))
    assert (entry.action, entry.org_id, entry.actor) == (
        "work.dead_lettered",
        ctx.org_id,
        ctx.user_id,
    )
    assert entry.data["attempts"] == 3


def test_fail_waits_the_holders_own_delay_when_it_names_one(face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    for bad in (-1, math.nan, math.inf, 86_401):
        with pytest.raises(ValueError, match="delay_s: must be 0 to 86400 seconds"):
            face.fail(item_ctx, held, "later", delay_s=bad)
    assert row(held.id).status == Status.CLAIMED  # refused before any statement
    retried = face.fail(item_ctx, held, "later", delay_s=600)
    assert retried.status == Status.PENDING and retried.attempts == 1
    assert 599.9 < (retried.available_at - retried.updated_at).total_seconds() < 600.1


def test_a_permanent_error_dead_letters_at_once(face, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert face.fail(item_ctx, held, "bad address", permanent=True).status == Status.FAILED


def test_complete_many_reports_what_it_refused(face, ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    for c in (ctx, ctx, other):
        face.enqueue(c, "NOOP", {})
    held = [item for _, item in face.claim(worker_rctx, "default", None, "w1", 30, 10)]
    assert len(held) == 3
    stale = held[0]
    face.release(ctx if stale.org_id == ctx.org_id else other, stale, "x")
    triples = [Fence.of(i) for i in held]
    # a wrong org with the right token and id is refused too
    triples[1] = Fence(
        ctx.org_id if held[1].org_id != ctx.org_id else other.org_id, *triples[1][1:]
    )
    done = face.complete_many(triples)
    assert done == {held[2].id} and done.fences == {triples[2]}
    assert row(held[1].id).status == Status.CLAIMED


def test_complete_many_matches_each_id_with_its_own_token(face, ctx, worker_rctx) -> None:
    """An id given twice (a stale fence and the live one) is completed by the live one,
    wherever each stands in the batch; a token given with another held item's id is refused."""
    for _ in range(2):
        face.enqueue(ctx, "NOOP", {})
    first, second = [item for _, item in face.claim(worker_rctx, "default", None, "w1", 30, 2)]
    stale = Fence(first.org_id, first.id, uuid.uuid4())
    crossed = Fence(second.org_id, second.id, first.claim_token)
    done = face.complete_many([stale, crossed, Fence.of(first)])
    assert done == {first.id}
    # The fence it was completed under, not the stale one of the same id (a worker that claimed
    # the item again counts and announces it once: workers/completing.py).
    assert done.fences == {Fence.of(first)}
    assert row(second.id).status == Status.CLAIMED
    assert face.extend_leases([crossed, stale], 300) == set()
    assert face.extend_leases([stale, Fence.of(second)], 300) == {second.id}


def test_extend_leases_renews_only_what_is_held(face, ctx, worker_rctx) -> None:
    for _ in range(3):
        face.enqueue(ctx, "NOOP", {})
    held = [item for _, item in face.claim(worker_rctx, "default", None, "w1", 5, 10)]
    face.complete(ctx, held[0])
    renewed = face.extend_leases([Fence.of(i) for i in held], 300)
    assert renewed == {held[1].id, held[2].id}


def test_fail_orphaned_fails_the_item_it_names_under_its_token(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    [(_item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    with pytest.raises(Conflict):
        fail_orphaned(held.id, held.id, "tenant is gone")  # a wrong token
    assert row(item.id).status == Status.CLAIMED
    failed = fail_orphaned(held.id, held.claim_token, "tenant is gone")
    assert (failed.status, failed.last_error) == (Status.FAILED, "tenant is gone")


def test_the_claim_fails_work_of_a_gone_tenant_and_never_hands_it_out(
    face, ctx, make_ctx, worker_rctx
) -> None:
    from tenancy.models import Org

    doomed, _ = face.enqueue(ctx, "NOOP", {})
    alive = make_ctx()
    kept, _ = face.enqueue(alive, "NOOP", {})
    Org.objects.using("admin").get(pk=ctx.org_id).mark_gone()
    claimed = face.claim(worker_rctx, "default", None, "w1", 30, 10)
    assert [item.id for _, item in claimed] == [kept.id]
    assert row(doomed.id).status == Status.FAILED and row(doomed.id).last_error == "tenant is gone"


def test_another_tenants_item_cannot_be_written_or_read(face, ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    theirs, _ = face.enqueue(other, "NOOP", {})
    [(_, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert held.id == theirs.id
    # ctx presents the other tenant's item, token and all
    for write in (
        lambda: face.complete(ctx, held),
        lambda: face.fail(ctx, held, "x", permanent=True),
        lambda: face.release(ctx, held, "x"),
        lambda: face.extend_lease(ctx, held, 60),
    ):
        with pytest.raises(Conflict):
            write()
    stored = row(held.id)
    assert (stored.status, stored.claim_token, stored.attempts) == (
        Status.CLAIMED,
        held.claim_token,
        1,
    )
    from tenancy.scope import tenant_scope

    with tenant_scope(ctx.org_id):
        assert not WorkItem.objects.filter(pk=held.id).exists()
    _, outcome = face.enqueue(ctx, "NOOP", {}, idempotency_key="only-mine")
    assert outcome.value == "inserted"


def test_the_member_still_in_the_org_keeps_their_role(face, ctx, worker_rctx) -> None:
    MembershipFactory(org_id=ctx.org_id)  # another member changes nothing
    Membership.objects.using("admin").filter(user_id=ctx.user_id).update(role=Role.ADMIN)
    face.enqueue(ctx, "NOOP", {})
    [(item_ctx, _)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert item_ctx.role == Role.ADMIN


def test_the_claim_never_waits_on_a_locked_row(face, ctx, worker_rctx) -> None:
    import threading

    item, _ = face.enqueue(ctx, "NOOP", {})
    locked, release_lock = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with connections["admin"].cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT 1 FROM workqueue_workitem WHERE id = %s FOR UPDATE", [item.id])
            locked.set()
            release_lock.wait(10)
            cursor.execute("ROLLBACK")
        connections.close_all()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        locked.wait(10)
        started = time.monotonic()
        assert face.claim(worker_rctx, "default", None, "w1", 30, 1) == []
        assert time.monotonic() - started < 8  # it skipped the lock held for 10 s
    finally:
        release_lock.set()
        holder.join()


@pytest.mark.parametrize(
    "error",
    ["NUL \x00 inside", "a lone surrogate \udcff", "x" * 50_000, "\x00" * 10],
)
def test_an_unstorable_error_text_still_settles(face, ctx, worker_rctx, error: str) -> None:
    """Issue 8.10: what a handler says never stops a settle (the item would stay claimed)."""
    face.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    failed = face.fail(item_ctx, held, error, permanent=True)
    assert failed.status == Status.FAILED
    stored = row(held.id).last_error
    assert "\x00" not in stored and len(stored) <= 10_000
    stored.encode("utf-8")


def test_attempt_five_thousand_settles(face, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    WorkItem.objects.using("admin").filter(pk=item.id).update(attempts=4999, max_attempts=10_000)
    [(item_ctx, held)] = face.claim(worker_rctx, "default", None, "w1", 30, 1)
    assert held.attempts == 5000
    retried = face.fail(item_ctx, held, "again")
    assert retried.status == Status.PENDING
    delay = (retried.available_at - _db_now()).total_seconds()
    assert 3600 * 0.74 < delay <= 3600
