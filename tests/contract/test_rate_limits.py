"""Rate limits: the claim hands out only what each limit allows now (GCRA buckets written by the
claim statement), leaves the rest pending with no attempt spent, and holds across claimers.

Time is simulated by moving a bucket's theoretical arrival time back (the database's clock
decides; no test sleeps through a period): limits here are per hour, so the seconds a test
takes never refill a bucket."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from django.db import connections

from audit.models import AuditEntry
from tenancy.contexts import AppType, new_request_context
from tests.helpers import queue_settings
from workqueue import api
from workqueue.api import Kind, Payload, register
from workqueue.claim import claim, forget_rate_limits
from workqueue.models import RateBucket, RateLimit, Status, WorkItem
from workqueue.pauses import SITE_ORG_ID
from workqueue.rate_limits import clear_rate_limit, read_rate_limits, set_rate_limit


class Free(Payload):
    n: int = 0


OTHER = Kind("TEST_RATE_OTHER", Free)
OPERATOR = "operator-7"


@pytest.fixture(autouse=True)
def _kinds() -> Iterator[None]:
    from workqueue import kinds

    register(OTHER)
    forget_rate_limits()
    yield
    forget_rate_limits()
    kinds._KINDS.pop(OTHER.name, None)


@pytest.fixture(params=[True, False], ids=["fair", "oldest_first"])
def claim_mode(request: pytest.FixtureRequest) -> Iterator[bool]:
    with queue_settings(FAIR_CLAIM=request.param):
        yield request.param


def _claimed(face, rctx, limit=50):  # type: ignore[no-untyped-def]
    return [item for _ctx, item in face.claim(rctx, "default", None, "w1", 30, limit)]


class _Sync:
    claim = claim


def _enqueue(ctx, n, kind="NOOP", **fields):  # type: ignore[no-untyped-def]
    return [api.enqueue(ctx, kind, {}, **fields)[0] for _ in range(n)]


def _an_hour_passes() -> None:
    """Every bucket's theoretical arrival time an hour earlier: as if an hour went by."""
    with connections["admin"].cursor() as cursor:
        cursor.execute("UPDATE workqueue_ratebucket SET tat = tat - interval '1 hour'")


def _ids(items):  # type: ignore[no-untyped-def]
    return {i.id for i in items}


def test_a_key_limit_hands_out_its_allowance_now_and_the_rest_later(
    face, claim_mode, ctx, worker_rctx
) -> None:
    set_rate_limit(OPERATOR, "key", "acct-1", "3/h")
    limited = _enqueue(ctx, 5, rate_key="acct-1")
    other_key = _enqueue(ctx, 2, rate_key="acct-2")
    other_kind = _enqueue(ctx, 2, OTHER.name)
    first = _claimed(face, worker_rctx)
    assert _ids(first) == _ids(limited[:3] + other_key + other_kind)
    assert _claimed(face, worker_rctx) == []
    waiting = WorkItem.objects.using("admin").filter(id__in=_ids(limited[3:]))
    # Waiting for the limit is not an attempt, nor a failure.
    assert {(w.status, w.attempts, w.last_error) for w in waiting} == {(Status.PENDING, 0, "")}
    _an_hour_passes()
    assert _ids(_claimed(face, worker_rctx)) == _ids(limited[3:])


def test_a_batch_within_the_limit_takes_only_the_allowance(face, ctx, worker_rctx) -> None:
    set_rate_limit(OPERATOR, "key", "acct-1", "10/h", burst=2)
    _enqueue(ctx, 5, rate_key="acct-1")
    assert len(_claimed(face, worker_rctx, limit=1)) == 1
    assert len(_claimed(face, worker_rctx, limit=5)) == 1
    assert _claimed(face, worker_rctx) == []


def test_a_kind_limit_leaves_other_kinds_alone(face, claim_mode, ctx, worker_rctx) -> None:
    set_rate_limit(OPERATOR, "kind", "NOOP", "2/h")
    noop = _enqueue(ctx, 4)
    other = _enqueue(ctx, 3, OTHER.name)
    assert _ids(_claimed(face, worker_rctx)) == _ids(noop[:2] + other)


def test_a_tenant_limit_leaves_other_tenants_alone(
    face, claim_mode, make_ctx, ctx, worker_rctx
) -> None:
    other_ctx = make_ctx()
    set_rate_limit(OPERATOR, "tenant", str(ctx.org_id), "2/h")
    mine = _enqueue(ctx, 4)
    theirs = _enqueue(other_ctx, 4)
    claimed = _claimed(face, worker_rctx)
    assert len(_ids(claimed) & _ids(mine)) == 2
    assert _ids(theirs) <= _ids(claimed)


def test_every_key_has_a_bucket_of_its_own(face, claim_mode, ctx, worker_rctx) -> None:
    set_rate_limit(OPERATOR, "key", "*", "1/h")
    items = {key: _enqueue(ctx, 2, rate_key=key) for key in ("a", "b", "c")}
    unkeyed = _enqueue(ctx, 2)
    claimed = _claimed(face, worker_rctx)
    assert _ids(claimed) == {items[k][0].id for k in "abc"} | _ids(unkeyed)
    assert RateBucket.objects.using("admin").count() == 3


def test_an_item_under_two_limits_is_held_by_the_tighter(ctx, worker_rctx) -> None:
    set_rate_limit(OPERATOR, "kind", "NOOP", "5/h")
    set_rate_limit(OPERATOR, "key", "acct-1", "2/h")
    keyed = _enqueue(ctx, 4, rate_key="acct-1")
    plain = _enqueue(ctx, 4)
    claimed = _claimed(_Sync, worker_rctx)
    # Ranked in claim order within each bucket: the kind's five places went to the four keyed
    # items and one plain one, and the key's limit let two keyed through.
    assert len(_ids(claimed) & _ids(keyed)) == 2 and len(_ids(claimed) & _ids(plain)) == 1
    # The kind's bucket spent only what was claimed (3): the next claim takes two more, plain
    # (the key's bucket is empty).
    assert _ids(_claimed(_Sync, worker_rctx)) == _ids(plain[1:3])
    assert _claimed(_Sync, worker_rctx) == []


def test_claimers_racing_never_exceed_the_limit_together(ctx) -> None:
    set_rate_limit(OPERATOR, "key", "hot", "7/h")
    _enqueue(ctx, 40, rate_key="hot")
    taken: list[int] = []
    barrier = threading.Barrier(4)

    def claimer() -> None:
        rctx = new_request_context(AppType.WORKER)
        try:
            barrier.wait()
            for _ in range(5):
                taken.append(len(claim(rctx, "default", None, f"w{threading.get_ident()}", 30, 3)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(taken) == 7
    claimed = WorkItem.objects.using("admin").filter(status=Status.CLAIMED).count()
    assert claimed == 7


def test_a_limit_changed_at_run_time_takes_effect_at_the_next_claim(face, ctx, worker_rctx) -> None:
    set_rate_limit(OPERATOR, "key", "acct-1", "1/h")
    _enqueue(ctx, 6, rate_key="acct-1")
    assert len(_claimed(face, worker_rctx)) == 1
    assert _claimed(face, worker_rctx) == []
    set_rate_limit(OPERATOR, "key", "acct-1", "3/h")  # a changed limit starts full
    assert len(_claimed(face, worker_rctx)) == 3
    assert clear_rate_limit(OPERATOR, "key", "acct-1") is not None
    assert len(_claimed(face, worker_rctx)) == 2
    assert RateBucket.objects.using("admin").count() == 0


def test_set_and_clear_are_audited_and_read_back(ctx, worker_rctx) -> None:
    request_id = uuid.uuid4()
    limit = set_rate_limit(OPERATOR, "kind", "NOOP", "600/m", request_id=request_id)
    assert (limit.n, limit.period_s, limit.burst, limit.rate) == (600, 60, 600, "600/m")
    _enqueue(ctx, 3)
    _claimed(_Sync, worker_rctx)
    [read] = read_rate_limits()
    assert (read.scope, read.target, read.used, read.set_by) == ("kind", "NOOP", 3, OPERATOR)
    assert clear_rate_limit(OPERATOR, "kind", "NOOP") is not None
    assert clear_rate_limit(OPERATOR, "kind", "NOOP") is None
    entries = AuditEntry.objects.using("admin").order_by("created_at", "action")
    assert [(e.action, e.actor, e.subject_id, e.org_id) for e in entries] == [
        ("queue.rate_limit_set", OPERATOR, "kind:NOOP", SITE_ORG_ID),
        ("queue.rate_limit_cleared", OPERATOR, "kind:NOOP", SITE_ORG_ID),
    ]
    assert entries[0].request_id == request_id


@pytest.mark.parametrize(
    ("scope", "target", "rate", "burst", "message"),
    [
        ("key", "k", "10", None, "rate: give N/s"),
        ("key", "k", "0/s", None, "rate: give N/s"),
        ("key", "k", "10/x", None, "rate: give N/s"),
        ("key", "k", "ten/s", None, "rate: give N/s"),
        ("key", "k", "10/s/2", None, "rate: give N/s"),
        ("key", "k", "10/s", 0, "burst: give a whole number"),
        ("key", "k", "10/s", "3", "burst: give a whole number"),
        ("nope", "k", "10/s", None, "scope: give one of kind, lane, tenant, key"),
        ("tenant", "acme", "10/s", None, "target: a tenant's id"),
        ("kind", "NO_SUCH_KIND", "10/s", None, "kind: unknown work kind"),
        ("lane", "nowhere", "10/s", None, "target: lane 'nowhere' is not declared"),
        ("key", "", "10/s", None, "target: must be a non-empty string"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_stored(
    committed, scope, target, rate, burst, message
) -> None:
    with pytest.raises(api.InvalidPayload, match=message):
        set_rate_limit(OPERATOR, scope, target, rate, burst)
    assert not RateLimit.objects.using("admin").exists()


def test_a_bad_rate_key_is_refused(ctx) -> None:
    with pytest.raises(api.InvalidPayload, match=r"rate_key: .*at most 200"):
        api.enqueue(ctx, "NOOP", {}, rate_key="k" * 201)


def test_the_everyday_login_cannot_read_or_write_limits(committed) -> None:
    for statement in (
        "SELECT * FROM workqueue_ratelimit",
        "UPDATE workqueue_ratebucket SET tat = now()",
    ):
        refused = pytest.raises(Exception, match="permission")
        with connections["default"].cursor() as cursor, refused:
            cursor.execute(statement)
        connections["default"].close()


def test_an_outbox_row_carries_its_rate_key_to_its_item(ctx, worker_rctx) -> None:
    from outbox.emit import emit
    from outbox.relay import relay_pending

    row_id = emit(ctx, "work.NOOP", {"n": 1, "rate_key": "acct-9"})
    assert relay_pending(worker_rctx).enqueued == 1
    item = WorkItem.objects.using("admin").get(id=row_id)
    assert item.rate_key == "acct-9" and "rate_key" not in item.payload


def test_the_queue_command_sets_lists_and_clears_a_limit(committed, capsys) -> None:
    from django.core.management import CommandError, call_command

    call_command("queue", "limit", "set", "key", "acct-1", "600/m", "--burst", "20")
    assert "limited key acct-1 to 600/m (burst 20)" in capsys.readouterr().out
    call_command("queue", "limit", "list")
    assert "key\tacct-1\t600/m\tburst 20" in capsys.readouterr().out
    with pytest.raises(CommandError, match="rate: give N/s"):
        call_command("queue", "limit", "set", "key", "acct-1", "600 a minute")
    assert RateLimit.objects.using("admin").get().count == 600
    call_command("queue", "limit", "clear", "key", "acct-1")
    assert "cleared the limit on key acct-1" in capsys.readouterr().out
    call_command("queue", "limit", "list")
    assert "no rate limit is set" in capsys.readouterr().out
