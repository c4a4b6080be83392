"""Rate limits: the claim hands out only what each limit allows now (GCRA buckets written by the
claim statement), leaves the rest pending with no attempt spent, and holds across claimers.

Time is simulated by moving a bucket's theoretical arrival time back (the database's clock
decides; no test sleeps through a period): limits here are per hour, so the seconds a test
takes never refill a bucket."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
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
        cursor.execute(
            "UPDATE workqueue_ratebucket"
            " SET tat = tat - interval '1 hour', free_at = free_at - interval '1 hour'"
        )


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


def test_a_claim_passes_over_an_empty_bucket_for_the_next_item(
    face, claim_mode, ctx, worker_rctx
) -> None:
    set_rate_limit(OPERATOR, "key", "acct-1", "3/h", burst=2)
    first, second, blocked = _enqueue(ctx, 3, rate_key="acct-1")
    behind = _enqueue(ctx, 1, rate_key="acct-2")
    assert _ids(_claimed(face, worker_rctx, limit=1)) == {first.id}
    # One of two spent: the bucket still allows one, so its next item comes first.
    assert _ids(_claimed(face, worker_rctx, limit=1)) == {second.id}
    # Empty now: the claim of one passes over its items to the item behind them.
    assert _ids(_claimed(face, worker_rctx, limit=1)) == _ids(behind)
    assert _claimed(face, worker_rctx) == []
    assert WorkItem.objects.using("admin").get(id=blocked.id).status == Status.PENDING


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


# Every scope, by its target and by '*': the claim finds each before it grants (the items' lane
# is "default", their key "acct-1"; None stands for their tenant).
_EACH_SCOPE = [
    ("kind", "NOOP"),
    ("kind", "*"),
    ("lane", "default"),
    ("lane", "*"),
    ("tenant", None),
    ("tenant", "*"),
    ("key", "acct-1"),
    ("key", "*"),
]


@pytest.mark.parametrize(("scope", "target"), _EACH_SCOPE, ids=[f"{s}:{t}" for s, t in _EACH_SCOPE])
def test_a_limit_in_each_scope_holds_the_claim(
    face, claim_mode, ctx, worker_rctx, scope, target
) -> None:
    set_rate_limit(OPERATOR, scope, target or str(ctx.org_id), "2/h")
    items = _enqueue(ctx, 4, rate_key="acct-1")
    assert _ids(_claimed(face, worker_rctx)) == _ids(items[:2])
    waiting = WorkItem.objects.using("admin").filter(id__in=_ids(items[2:]))
    assert {(w.status, w.attempts) for w in waiting} == {(Status.PENDING, 0)}


@pytest.mark.parametrize(
    ("scope", "target"),
    [("kind", OTHER.name), ("lane", "elsewhere"), ("tenant", str(uuid.uuid4())), ("key", "acct-2")],
)
def test_a_limit_that_counts_none_of_the_items_spends_no_bucket(
    face, claim_mode, ctx, worker_rctx, scope, target
) -> None:
    with queue_settings(LANES=["default", "elsewhere"]):
        set_rate_limit(OPERATOR, scope, target, "1/h")
    items = _enqueue(ctx, 3, rate_key="acct-1")
    assert _ids(_claimed(face, worker_rctx)) == _ids(items)
    assert RateBucket.objects.using("admin").count() == 0


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


def test_a_key_named_and_every_key_in_one_scope_both_hold(ctx, worker_rctx) -> None:
    set_rate_limit(OPERATOR, "key", "*", "3/h")
    set_rate_limit(OPERATOR, "key", "acct-1", "1/h")
    named = _enqueue(ctx, 3, rate_key="acct-1")
    other = _enqueue(ctx, 4, rate_key="acct-2")
    claimed = _claimed(_Sync, worker_rctx)
    # acct-1 is held by its own limit (1) within the '*' one (3); acct-2 by the '*' one alone.
    assert _ids(claimed) == _ids(named[:1] + other[:3])
    assert RateBucket.objects.using("admin").count() == 3


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


def test_a_claim_held_back_by_a_limit_says_when_the_limit_frees(
    face, claim_mode, ctx, worker_rctx
) -> None:
    set_rate_limit(OPERATOR, "key", "acct-1", "3/h")  # one per 1,200 s, three at once
    _enqueue(ctx, 5, rate_key="acct-1")
    first = face.claim(worker_rctx, "default", None, "w1", 30, 50)
    # It spent the bucket to its allowance and trimmed two: one more in 1,200 s.
    assert len(first) == 3 and first.rate_wait_s == pytest.approx(1200)
    # The next passes over the empty bucket's items, and reads the same moment from it.
    again = face.claim(worker_rctx, "default", None, "w1", 30, 50)
    assert again == [] and 1190 < again.rate_wait_s <= 1200
    _an_hour_passes()
    took = face.claim(worker_rctx, "default", None, "w1", 30, 50)
    assert len(took) == 2 and took.rate_wait_s is None


def test_a_claim_says_nothing_of_limits_that_held_none_of_its_items_back(
    face, ctx, worker_rctx
) -> None:
    assert face.claim(worker_rctx, "default", None, "w1", 30, 5).rate_wait_s is None
    set_rate_limit(OPERATOR, "kind", OTHER.name, "1/h")
    _enqueue(ctx, 2, OTHER.name)
    _enqueue(ctx, 2, rate_key="acct-1")
    assert face.claim(worker_rctx, "default", None, "w1", 30, 50).rate_wait_s == pytest.approx(3600)
    # The other kind's bucket allows nothing, but this claim does not take that kind.
    _enqueue(ctx, 1)
    only_noop = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 50)
    assert len(only_noop) == 1 and only_noop.rate_wait_s is None


def test_a_bucket_with_room_keeps_its_free_at_and_one_left_empty_gets_its_own(
    ctx, worker_rctx
) -> None:
    set_rate_limit(OPERATOR, "key", "acct-1", "3/h")  # one per 1,200 s, three at once
    _enqueue(ctx, 4, rate_key="acct-1")
    bucket = RateBucket.objects.using("admin")

    def state():  # type: ignore[no-untyped-def]
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT tat, free_at, now() FROM workqueue_ratebucket")
            return cursor.fetchone()

    assert len(_claimed(_Sync, worker_rctx, limit=1)) == 1
    tat, free_at, now = state()
    assert free_at < now < tat  # made with room: free_at already past
    assert len(_claimed(_Sync, worker_rctx, limit=1)) == 1
    later_tat, same_free_at, _ = state()
    # Spent with room left: tat moved, free_at (the indexed column) did not (a HOT update).
    assert later_tat > tat and same_free_at == free_at
    assert len(_claimed(_Sync, worker_rctx, limit=1)) == 1
    last_tat, empty_free_at, now = state()
    # Left allowing nothing: free_at is when it allows one more, tat - (burst - 1) * 1,200 s.
    assert empty_free_at > now and (last_tat - empty_free_at).total_seconds() == 2400
    assert _claimed(_Sync, worker_rctx) == []
    assert bucket.count() == 1


def _notices_after(action) -> list[str]:  # type: ignore[no-untyped-def]
    params = connections["admin"].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute("LISTEN work_available")
        action()
        return [n.payload for n in listener.notifies(timeout=5, stop_after=1)]


def test_setting_or_clearing_a_limit_wakes_every_lane(committed) -> None:
    # What it allows now (or, cleared, what it held back) is claimed at once, not at a poll.
    assert _notices_after(lambda: set_rate_limit(OPERATOR, "key", "acct-1", "3/h")) == ["*"]
    assert _notices_after(lambda: clear_rate_limit(OPERATOR, "key", "acct-1")) == ["*"]


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
        # The claim's spending functions run as their caller (SECURITY INVOKER): nor through them.
        *(
            f"SELECT * FROM workqueue_rate_grant_v{v}(ARRAY[gen_random_uuid()], ARRAY['NOOP'],"
            " ARRAY[gen_random_uuid()], ARRAY['acct'], 'default')"
            for v in (1, 2)
        ),
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
    listed = capsys.readouterr().out
    assert "key\tacct-1\t600/m\tburst 20\t20 of 20 free now" in listed  # nothing used it
    assert "set by system" in listed, listed
    with pytest.raises(CommandError, match="rate: give N/s"):
        call_command("queue", "limit", "set", "key", "acct-1", "600 a minute")
    assert RateLimit.objects.using("admin").get().count == 600
    call_command("queue", "limit", "clear", "key", "acct-1")
    assert "cleared the limit on key acct-1" in capsys.readouterr().out
    call_command("queue", "limit", "list")
    assert "no rate limit is set" in capsys.readouterr().out


def test_the_sweep_deletes_idle_buckets_in_batches_and_keeps_the_rest(ctx, worker_rctx) -> None:
    from workqueue.rate_limits import purge_rate_buckets

    set_rate_limit(OPERATOR, "key", "*", "2/h")
    for key in ("a", "b", "c", "d"):
        _enqueue(ctx, 1, rate_key=key)
    assert len(_claimed(_Sync, worker_rctx)) == 4
    buckets = RateBucket.objects.using("admin")
    with connections["admin"].cursor() as cursor:
        # a, b, c idle a whole burst (2 per hour: an hour) and more; d spent a moment ago.
        cursor.execute(
            "UPDATE workqueue_ratebucket SET tat = now() - interval '61 minutes',"
            " free_at = now() - interval '91 minutes' WHERE key <> 'd'"
        )
        # A bucket of a limit no longer set, however recent.
        cursor.execute("INSERT INTO workqueue_ratebucket VALUES (-1, 'stray', now(), now())")
    assert purge_rate_buckets(batch=2, max_batches=1) == 2
    assert purge_rate_buckets(batch=2) == 2
    assert sorted(buckets.values_list("key", flat=True)) == ["d"]
    # A bucket deleted is full again: its key's allowance is the whole burst.
    _enqueue(ctx, 3, rate_key="a")
    assert len(_claimed(_Sync, worker_rctx)) == 2


def test_the_sweep_keeps_a_bucket_spent_within_its_burst(ctx, worker_rctx) -> None:
    from workqueue.rate_limits import purge_rate_buckets

    set_rate_limit(OPERATOR, "key", "acct-1", "2/h")
    _enqueue(ctx, 2, rate_key="acct-1")
    assert len(_claimed(_Sync, worker_rctx)) == 2
    # An hour later the bucket has room again, but was not idle for a whole burst.
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "UPDATE workqueue_ratebucket"
            " SET tat = tat - interval '90 minutes', free_at = free_at - interval '90 minutes'"
        )
    assert purge_rate_buckets() == 0
    assert RateBucket.objects.using("admin").count() == 1


def test_metrics_carry_what_each_limit_has_spent_and_name_no_tenant(ctx, worker_rctx) -> None:
    from workers.gauges import CachedGauges, QueueCollector

    set_rate_limit(OPERATOR, "key", "acct-1", "4/h")
    mine = set_rate_limit(OPERATOR, "tenant", str(ctx.org_id), "1/h")
    _enqueue(ctx, 3, rate_key="acct-1")
    assert len(_claimed(_Sync, worker_rctx)) == 1  # the tenant's limit holds the rest
    families = {f.name: f for f in QueueCollector(CachedGauges(cache_s=0)).collect()}

    def samples(name: str) -> dict[tuple[str, str], float]:
        return {(s.labels["scope"], s.labels["target"]): s.value for s in families[name].samples}

    tenant = ("tenant", f"limit {mine.id}")
    assert samples("workqueue_rate_limit_spent") == {("key", "acct-1"): 1, tenant: 1}
    assert samples("workqueue_rate_limit_blocked_buckets") == {("key", "acct-1"): 0, tenant: 1}
