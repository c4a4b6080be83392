"""The claim's controls: pauses, concurrency keys, lane and kind caps, held by the claim
statement (both faces, both claims: fair and oldest first) and by the database's indexes."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import IntegrityError, connections
from django.utils import timezone

from audit.models import AuditEntry
from tests.helpers import queue_settings
from workqueue import api, runtime
from workqueue import pauses as lane_pauses
from workqueue.api import Kind, NewItem, Payload, register
from workqueue.claim import claim
from workqueue.models import Pause, Status, WorkItem
from workqueue.pauses import pause
from workqueue.settle import complete, fail


class Free(Payload):
    n: int = 0


# Registered for this module's tests only (a fixture): a capped kind would make every claim
# that names it (kinds=None names every kind) take its lane's mutex, and its lane would be
# declared for every other test.
CAPPED = Kind("TEST_CAPPED", Free, lane="capped", max_running=3)
OTHER = Kind("TEST_OTHER_DEFAULT", Free)


@pytest.fixture(autouse=True)
def _kinds():  # type: ignore[no-untyped-def]
    from workqueue import kinds

    for kind in (CAPPED, OTHER):
        register(kind)
    yield
    for kind in (CAPPED, OTHER):
        kinds._KINDS.pop(kind.name, None)


OPERATOR = "operator-7"


@pytest.fixture(params=[True, False], ids=["fair", "oldest_first"])
def claim_mode(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """The fair claim, then the claim with fairness off: every control holds in both."""
    with queue_settings(FAIR_CLAIM=request.param):
        yield request.param


def _claimed(face, rctx, lane="default", kinds=None, limit=10, worker="w1"):  # type: ignore[no-untyped-def]
    return [item for _ctx, item in face.claim(rctx, lane, kinds, worker, 30, limit)]


# -- pause and resume ---------------------------------------------------------------------------


def test_a_paused_lane_is_not_claimed_until_resumed(face, claim_mode, ctx, worker_rctx) -> None:
    item, _ = face.enqueue(ctx, "NOOP", {})
    paused, changed = pause(OPERATOR, "default", reason="deploying")
    assert changed and (paused.lane, paused.kind, paused.paused_by) == ("default", "", OPERATOR)
    assert _claimed(face, worker_rctx) == []
    assert WorkItem.objects.using("admin").get(id=item.id).status == Status.PENDING
    ended = lane_pauses.resume(OPERATOR, "default")
    assert ended is not None and ended.reason == "deploying"
    assert [i.id for i in _claimed(face, worker_rctx)] == [item.id]


def test_a_paused_kind_stops_only_that_kind(face, claim_mode, ctx, worker_rctx) -> None:
    noop, _ = face.enqueue(ctx, "NOOP", {})
    other, _ = face.enqueue(ctx, OTHER.name, {})
    pause(OPERATOR, "default", "NOOP")
    assert [i.id for i in _claimed(face, worker_rctx)] == [other.id]
    lane_pauses.resume(OPERATOR, "default", "NOOP")
    assert [i.id for i in _claimed(face, worker_rctx)] == [noop.id]


def test_resuming_the_lane_leaves_a_kind_paused_on_its_own(ctx, worker_rctx) -> None:
    api.enqueue(ctx, "NOOP", {})
    pause(OPERATOR, "default")
    pause(OPERATOR, "default", "NOOP")
    lane_pauses.resume(OPERATOR, "default")
    assert claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10) == []
    assert [p.target for p in runtime.read_pauses()] == ["default:NOOP"]


def test_a_running_item_finishes_while_its_lane_is_paused(ctx, worker_rctx) -> None:
    api.enqueue(ctx, "NOOP", {})
    [(item_ctx, held)] = claim(worker_rctx, "default", None, "w1", 30, 1)
    pause(OPERATOR, "default")
    assert complete(item_ctx, held).status == Status.DONE


def test_pause_and_resume_are_audited_once_with_the_actor(ctx) -> None:
    request_id = uuid.uuid4()
    assert pause(OPERATOR, "default", "NOOP", request_id=request_id)[1] is True
    again, changed = pause("someone-else", "default", "NOOP")
    assert not changed and again.paused_by == OPERATOR  # the first pause stands
    assert lane_pauses.resume(OPERATOR, "default", "NOOP") is not None
    assert lane_pauses.resume(OPERATOR, "default", "NOOP") is None  # not paused: nothing to do
    entries = list(AuditEntry.objects.using("admin").order_by("created_at", "action"))
    assert [(e.action, e.actor, e.subject_id, e.org_id) for e in entries] == [
        ("queue.paused", OPERATOR, "default:NOOP", lane_pauses.SITE_ORG_ID),
        ("queue.resumed", OPERATOR, "default:NOOP", lane_pauses.SITE_ORG_ID),
    ]
    assert entries[0].request_id == request_id
    assert entries[1].data["paused_by"] == OPERATOR


@pytest.mark.parametrize(
    ("lane", "kind", "message"),
    [
        ("nowhere", None, "lane: 'nowhere' is not declared"),
        ("default", "NO_SUCH_KIND", "kind: unknown work kind 'NO_SUCH_KIND'"),
        ("bad lane!", None, "lane:"),
    ],
)
def test_a_pause_of_an_unknown_lane_or_kind_is_refused(committed, lane, kind, message) -> None:
    with pytest.raises(api.InvalidPayload, match=message):
        pause(OPERATOR, lane, kind)
    assert not Pause.objects.using("admin").exists()


def test_the_everyday_login_cannot_read_or_write_pauses(committed) -> None:
    with connections["default"].cursor() as cursor, pytest.raises(Exception, match="permission"):
        cursor.execute("INSERT INTO workqueue_pause (lane, kind, paused_by) VALUES ('x', '', 'me')")
    connections["default"].close()


def test_resume_announces_the_lane_on_work_available(committed) -> None:
    params = connections["admin"].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    pause(OPERATOR, "default")
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute("LISTEN work_available")
        lane_pauses.resume(OPERATOR, "default")
        notices = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert notices == ["default"]


# -- concurrency keys ---------------------------------------------------------------------------


def test_one_item_per_key_runs_at_a_time_in_order(face, claim_mode, make_ctx, ctx, worker_rctx):  # type: ignore[no-untyped-def]
    other = make_ctx()
    keyed = [face.enqueue(ctx, "NOOP", {"n": n}, concurrency_key="k")[0] for n in range(3)]
    theirs, _ = face.enqueue(other, "NOOP", {}, concurrency_key="k")  # another tenant's "k"
    free, _ = face.enqueue(ctx, "NOOP", {})
    first = _claimed(face, worker_rctx)
    assert {i.id for i in first} == {keyed[0].id, theirs.id, free.id}
    assert _claimed(face, worker_rctx, worker="w2") == []  # the key is held
    done = []
    for expected in keyed[1:]:
        held = next(i for i in first if i.id == keyed[0].id) if not done else done[-1]
        face.complete(ctx, held)
        [nxt] = _claimed(face, worker_rctx)
        assert nxt.id == expected.id and nxt.concurrency_key == "k"
        done.append(nxt)


def test_a_higher_priority_item_of_a_key_goes_first(face, claim_mode, ctx, worker_rctx) -> None:
    face.enqueue(ctx, "NOOP", {"n": 1}, concurrency_key="k")
    urgent, _ = face.enqueue(ctx, "NOOP", {"n": 2}, concurrency_key="k", priority=5)
    assert [i.id for i in _claimed(face, worker_rctx)] == [urgent.id]


def test_a_batch_takes_only_the_first_of_each_key(face, claim_mode, ctx, worker_rctx) -> None:
    ids = face.enqueue_many(
        ctx, [NewItem("NOOP", {"n": n}, concurrency_key=f"k{n % 2}") for n in range(6)]
    )
    claimed = _claimed(face, worker_rctx)
    assert sorted(i.id for i in claimed) == sorted([ids[0][0], ids[1][0]])


def test_a_retried_item_of_a_key_lets_the_next_one_run(ctx, worker_rctx) -> None:
    """A failed item waits for its retry like a new one: it holds no place in its key."""
    first, _ = api.enqueue(ctx, "NOOP", {"n": 1}, concurrency_key="k")
    second, _ = api.enqueue(ctx, "NOOP", {"n": 2}, concurrency_key="k")
    [(item_ctx, held)] = claim(worker_rctx, "default", None, "w1", 30, 10)
    fail(item_ctx, held, "try later")
    [(_c, nxt)] = claim(worker_rctx, "default", None, "w1", 30, 10)
    assert (held.id, nxt.id) == (first.id, second.id)


def test_the_database_refuses_a_second_claimed_item_of_a_key(ctx) -> None:
    a, _ = api.enqueue(ctx, "NOOP", {}, concurrency_key="k")
    b, _ = api.enqueue(ctx, "NOOP", {}, concurrency_key="k")
    claim = "UPDATE workqueue_workitem SET status = 'claimed' WHERE id = %s"
    with connections["admin"].cursor() as cursor:
        cursor.execute(claim, [a.id])
        with pytest.raises(IntegrityError, match="workitem_one_claimed_per_key"):
            cursor.execute(claim, [b.id])


def test_a_claim_that_loses_the_race_for_a_key_takes_nothing(ctx, worker_rctx) -> None:
    """Another claimer holds an item of the key this claim cannot see yet (here: inserted and
    claimed in a transaction not yet committed); the unique index makes this claim wait for it,
    then refuses it, and the claim answers nothing rather than an error."""
    waiting, _ = api.enqueue(ctx, "NOOP", {}, concurrency_key="k")
    params = connections["admin"].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    rival = psycopg.connect(**params)
    rival.execute(
        "INSERT INTO workqueue_workitem (id, org_id, kind, lane, status, payload, concurrency_key,"
        " priority, available_at, attempts, max_attempts, last_error, created_by, updated_by,"
        " created_at, updated_at, claim_token)"
        " SELECT gen_random_uuid(), org_id, kind, lane, 'claimed', payload, concurrency_key,"
        " priority, available_at - interval '1 hour', 1, 3, '', created_by, updated_by, now(),"
        " now(), gen_random_uuid() FROM workqueue_workitem WHERE id = %s",
        [waiting.id],
    )
    commit = threading.Timer(1.0, rival.commit)
    commit.start()
    try:
        assert claim(worker_rctx, "default", None, "w1", 30, 10) == []
    finally:
        commit.join()
        rival.close()
    assert WorkItem.objects.using("admin").get(id=waiting.id).status == Status.PENDING


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("k" * 201, "concurrency_key: .*at most 200"),
        ("a\x00b", "concurrency_key: .*NUL"),
        (7, "concurrency_key"),
    ],
)
def test_a_bad_concurrency_key_is_refused_and_nothing_stored(ctx, key, message) -> None:
    with pytest.raises(api.InvalidPayload, match=message):
        api.enqueue(ctx, "NOOP", {}, concurrency_key=key)
    with pytest.raises(api.InvalidPayload, match=message):
        api.enqueue_many(ctx, [NewItem("NOOP", {}, concurrency_key=key)])
    assert not WorkItem.objects.using("admin").exists()


# -- caps ---------------------------------------------------------------------------------------


def test_a_capped_kind_never_has_more_running_than_its_cap(
    face, claim_mode, committed, make_ctx, worker_rctx
):  # type: ignore[no-untyped-def]
    tenants = [make_ctx() for _ in range(3)]
    for n in range(12):
        face.enqueue(tenants[n % 3], CAPPED.name, {"n": n})
    first = face.claim(worker_rctx, "capped", None, "w1", 30, 10)
    assert len(first) == 3
    assert _claimed(face, worker_rctx, "capped", worker="w2") == []
    item_ctx, held = first[0]
    face.complete(item_ctx, held)
    assert len(_claimed(face, worker_rctx, "capped")) == 1
    running = WorkItem.objects.using("admin").filter(status=Status.CLAIMED).count()
    assert running == 3


def test_a_lane_cap_bounds_what_the_lane_runs(
    face, claim_mode, committed, make_ctx, worker_rctx
) -> None:
    tenants = [make_ctx() for _ in range(2)]
    for n in range(6):
        face.enqueue(tenants[n % 2], "NOOP", {"n": n})
    with queue_settings(LANE_CAPS={"default": 2}):
        assert len(_claimed(face, worker_rctx)) == 2
        assert _claimed(face, worker_rctx) == []
    assert len(_claimed(face, worker_rctx)) == 4  # no cap: the rest


def test_a_tenant_cap_still_holds_with_keys_and_a_lane_cap(
    committed, make_ctx, worker_rctx
) -> None:
    busy, quiet = make_ctx(), make_ctx()
    runtime.TenantShare.objects.using("admin").create(org_id=busy.org_id, max_in_flight=2)
    api.enqueue_many(busy, [NewItem("NOOP", {"n": n}) for n in range(6)])
    api.enqueue_many(quiet, [NewItem("NOOP", {"n": n}, concurrency_key="q") for n in range(3)])
    claim_module = __import__("workqueue.claim", fromlist=["forget_caps"])
    claim_module.forget_caps()
    with queue_settings(LANE_CAPS={"default": 5}):
        claimed = claim(worker_rctx, "default", None, "w1", 30, 10)
    by_tenant = {busy.org_id: 0, quiet.org_id: 0}
    for _c, item in claimed:
        by_tenant[item.org_id] += 1
    assert by_tenant == {busy.org_id: 2, quiet.org_id: 1}


def test_a_lane_cap_must_be_positive() -> None:
    from django.core.exceptions import ImproperlyConfigured

    from wqcore.conf import load

    with pytest.raises(ImproperlyConfigured, match="LANE_CAPS"):
        load({"LANE_CAPS": {"default": 0}})
    with pytest.raises(ValueError, match="max_running must be 1 to 100000"):
        Kind("TEST_BAD_CAP", Free, max_running=0)


def test_a_due_item_behind_an_unavailable_one_of_its_key_runs(ctx, worker_rctx) -> None:
    """An item due later holds no place: the first *due* item of a key is its next."""
    later = timezone.now() + timedelta(hours=1)
    api.enqueue(ctx, "NOOP", {"n": 1}, concurrency_key="k", available_at=later, priority=9)
    due, _ = api.enqueue(ctx, "NOOP", {"n": 2}, concurrency_key="k")
    assert [i.id for _c, i in claim(worker_rctx, "default", None, "w1", 30, 10)] == [due.id]


def test_a_claim_naming_a_kind_this_process_does_not_know_still_runs(ctx, worker_rctx) -> None:
    """Caps are read from the registry; a kind it lacks has none, and the claim goes on."""
    item, _ = api.enqueue(ctx, "NOOP", {})
    claimed = claim(worker_rctx, "default", ["NOT_REGISTERED_HERE", "NOOP"], "w1", 30, 10)
    assert [i.id for _c, i in claimed] == [item.id]


def test_an_outbox_row_carries_its_concurrency_key_to_its_item(ctx, worker_rctx) -> None:
    from outbox.emit import emit
    from outbox.relay import relay_pending

    row_id = emit(ctx, "work.NOOP", {"n": 1, "concurrency_key": "order:9"})
    assert relay_pending(worker_rctx).enqueued == 1
    item = WorkItem.objects.using("admin").get(id=row_id)
    assert item.concurrency_key == "order:9" and "concurrency_key" not in item.payload
    with pytest.raises(api.InvalidPayload, match="concurrency_key"):
        emit(ctx, "work.NOOP", {"n": 1, "concurrency_key": "x" * 201})
