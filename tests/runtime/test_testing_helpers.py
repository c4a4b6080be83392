"""The testing helpers a site's tests use (``workers.testing``), on real PostgreSQL and a real
in-process worker: what was enqueued, a drain through the claim, fence, lease and settle, one
item performed, inline runs on commit, tenants, and ``@task``s."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from tests import tasks
from tests.runtime.support import EVENTS
from workers import testing
from workqueue import api
from workqueue.models import Attempt, Status, WorkItem

# What the chained handler enqueues, in the lane it ran in.
CHAIN = "TEST_CHAIN"


class ChainPayload(api.Payload):
    then: str = "ok"


api.register(api.Kind(CHAIN, ChainPayload, max_attempts=2))


@api.handles(CHAIN)
class ChainHandler:
    def handle(self, ctx: OpContext, item: api.WorkItem, run: api.Run) -> None:
        api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": item.payload["then"]}, lane=item.lane)


# What a handler run by a drain saw: the sessions listening on the test database.
LISTENING_SEEN = "TEST_LISTENING_SEEN"
SEEN: list[int] = []

api.register(api.Kind(LISTENING_SEEN, api.Payload))


@api.handles(LISTENING_SEEN)
class ListeningSeen:
    def handle(self, ctx: OpContext, item: api.WorkItem, run: api.Run) -> None:
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND query LIKE 'LISTEN %'"
            )
            SEEN.append(cursor.fetchone()[0])
        connections["admin"].close()


def _started() -> list[str]:
    return [item_id for item_id, event, _ in EVENTS if event == "start"]


# -- what was enqueued ------------------------------------------------------------------------


def test_assert_enqueued_matches_kind_lane_tenant_and_payload_keys(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    item, _ = api.enqueue(ctx, "TEST_SCRIPTED", {"action": "ok", "sleep_s": 0.5}, lane="mail")
    api.enqueue(other, "TEST_SCRIPTED", {"action": "retry"})

    [found] = testing.assert_enqueued("TEST_SCRIPTED", lane="mail", payload={"action": "ok"})
    assert found.id == item.id
    assert testing.assert_enqueued("TEST_SCRIPTED", tenant=ctx, count=1)[0].id == item.id
    assert len(testing.enqueued("TEST_SCRIPTED")) == 2
    testing.refute_enqueued("TEST_SCRIPTED", tenant=ctx, payload={"action": "retry"})
    testing.refute_enqueued("TEST_SCRIPTED_SYNC")


def test_a_failed_assertion_says_what_was_asked_and_lists_what_waits(ctx) -> None:  # type: ignore[no-untyped-def]
    api.enqueue(ctx, "TEST_SCRIPTED", {"action": "retry"}, lane="mail")
    with pytest.raises(AssertionError) as failed:
        testing.assert_enqueued("TEST_SCRIPTED", payload={"action": "ok"})
    message = str(failed.value)
    assert "TEST_SCRIPTED payload={'action': 'ok'}; found 0" in message
    assert "TEST_SCRIPTED lane=mail" in message and "'action': 'retry'" in message
    with pytest.raises(AssertionError, match="expected 2 enqueued"):
        testing.assert_enqueued("TEST_SCRIPTED", count=2)
    with pytest.raises(AssertionError, match="expected nothing enqueued: TEST_SCRIPTED"):
        testing.refute_enqueued("TEST_SCRIPTED")


@pytest.mark.django_db(databases=["default", "system", "admin"])
def test_inside_a_tests_transaction_a_tenant_reads_its_uncommitted_items(make_ctx) -> None:  # type: ignore[no-untyped-def]
    ctx = make_ctx()
    with tenant_scope(ctx.org_id):
        api.enqueue(ctx, "TEST_SCRIPTED", {"action": "ok"})
    assert len(testing.assert_enqueued("TEST_SCRIPTED", tenant=ctx.org_id)) == 1
    # Across tenants the queue reads on the system login: another connection, which cannot
    # see this transaction's rows; saying so beats answering "nothing".
    with pytest.raises(RuntimeError, match="name the tenant, or commit them"):
        testing.enqueued("TEST_SCRIPTED")
    with pytest.raises(RuntimeError, match=r"django_db\(transaction=True\)"):
        testing.drain()


# -- draining ---------------------------------------------------------------------------------


def test_a_drain_runs_each_due_item_once_through_a_worker(ctx) -> None:  # type: ignore[no-untyped-def]
    ids = {str(api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "ok"})[0].id) for _ in range(3)}
    later, _ = api.enqueue(
        ctx, "TEST_SCRIPTED_SYNC", {}, available_at=datetime.now(UTC) + timedelta(hours=1)
    )
    elsewhere, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {}, lane="mail")

    drained = testing.drain("default", ["TEST_SCRIPTED_SYNC"])

    assert drained.counts() == {"done": 3} and drained.done == 3
    assert set(_started()) == ids
    for run in drained.ran:
        # Claimed (a fresh token, one attempt spent), run, and completed under that token.
        assert run.item.status == Status.DONE and run.item.attempts == 1
        assert run.item.claim_token is not None
        [attempt] = Attempt.objects.using("admin").filter(item_id=run.item.id)
        assert (attempt.outcome, attempt.worker) == ("done", run.item.claimed_by)
    # Not due yet, and another lane: untouched.
    assert {WorkItem.objects.using("admin").get(id=i).status for i in (later.id, elsewhere.id)} == {
        Status.PENDING
    }
    assert testing.drain("default", ["TEST_SCRIPTED_SYNC"]).ran == []


def _opened_since(moment: object) -> int:
    """Sessions of the test database opened at or after ``moment`` and still open. A session
    the client closed ends a moment later on the server (its backend exits on its own time):
    waited for, up to a few seconds; a session left open stays and is counted."""
    deadline = time.monotonic() + 5
    while True:
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_start >= %s",
                [moment],
            )
            opened = cursor.fetchone()[0]
        if opened == 0 or time.monotonic() > deadline:
            return opened
        time.sleep(0.05)


def test_a_drain_leaves_no_session_open_behind_it(ctx) -> None:  # type: ignore[no-untyped-def]
    """The worker ran in this process, which goes on: its pools, its listener and its sync
    handlers' threads closed what they opened (the test database could not be dropped else)."""
    for _ in range(3):
        api.enqueue(ctx, CHAIN, {"then": "ok"}, lane="chain")  # a sync handler that writes
    testing.assert_enqueued(count=3)  # this thread's own sessions: the everyday and the system
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        started = cursor.fetchone()[0]
    assert testing.drain("chain", capacity=3).done == 6
    assert _opened_since(started) == 0


def test_a_drain_holds_no_listen_session(ctx) -> None:  # type: ignore[no-untyped-def]
    """A drain never waits for a notice (it claims until nothing is due): it opens no LISTEN
    session, and its stop waits for no listener's thread."""
    SEEN.clear()
    api.enqueue(ctx, LISTENING_SEEN, {})
    assert testing.drain("default", [LISTENING_SEEN]).done == 1
    assert SEEN == [0]


def test_a_drain_runs_what_its_handlers_enqueue(ctx) -> None:  # type: ignore[no-untyped-def]
    api.enqueue(ctx, CHAIN, {"then": "ok"}, lane="chain")
    drained = testing.drain("chain")
    assert [(run.item.kind, run.ended) for run in drained.ran] == [
        (CHAIN, "done"),
        ("TEST_SCRIPTED_SYNC", "done"),
    ]


def test_a_drain_runs_a_workflows_steps_as_their_parents_complete(ctx) -> None:  # type: ignore[no-untyped-def]
    """Each step is due only once the statement that completes its parent is written (by the
    worker's batched completion, after the parent's run ended): the drain looks again then."""
    wf = api.Workflow()
    steps = wf.chain(*(api.NewItem(CHAIN, {"then": "ok"}, lane="chain") for _ in range(4)))
    declared = api.enqueue_workflow(ctx, wf)
    drained = testing.drain("chain", [CHAIN])
    assert [run.item.id for run in drained.ran] == [declared[s] for s in steps]
    assert drained.done == 4


def test_a_failing_handler_fails_the_test_with_its_traceback(ctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "permanent"})
    with pytest.raises(testing.DrainFailed) as failed:
        testing.drain()
    message = str(failed.value)
    assert f"TEST_SCRIPTED_SYNC {item.id} (dead_lettered, attempt 1)" in message
    # The handler's own frames: where it raised, in the test kinds' module.
    assert "tests/runtime/support.py" in message and 'raise PermanentError("never")' in message
    assert isinstance(failed.value.__cause__, api.PermanentError)
    assert WorkItem.objects.using("admin").get(id=item.id).status == Status.FAILED


def test_without_raising_a_drain_returns_retries_and_dead_letters(ctx) -> None:  # type: ignore[no-untyped-def]
    retried, _ = api.enqueue(ctx, "TEST_SCRIPTED", {"action": "retry"})
    api.enqueue(ctx, "TEST_SCRIPTED", {"action": "permanent"})
    drained = testing.drain(raise_failures=False)
    assert drained.counts() == {"retried": 1, "dead_lettered": 1}
    assert [type(run.exception).__name__ for run in drained.failures] == [
        "RetryableError",
        "PermanentError",
    ]
    # The retry waits for its delay: another drain finds nothing due...
    assert testing.drain(raise_failures=False).ran == []
    # ...unless it is asked to run what is scheduled: then until its attempts are spent.
    rounds = testing.drain(scheduled=True, raise_failures=False)
    assert [run.ended for run in rounds.ran] == ["retried", "dead_lettered"]
    assert rounds.ran[-1].item.id == retried.id and rounds.ran[-1].item.attempts == 3


def test_perform_runs_just_the_one_item(ctx) -> None:  # type: ignore[no-untyped-def]
    waiting, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "ok"})
    run = testing.perform("TEST_SCRIPTED_SYNC", {"action": "ok"}, ctx=ctx)
    assert run.ended == "done" and run.item.status == Status.DONE
    assert run.item.lane.startswith("test-") and run.item.org_id == ctx.org_id
    assert _started() == [str(run.item.id)]
    assert WorkItem.objects.using("admin").get(id=waiting.id).status == Status.PENDING
    failed = testing.perform("TEST_SCRIPTED", {"action": "retry"}, ctx=ctx, raise_failures=False)
    assert failed.ended == "retried" and isinstance(failed.exception, api.RetryableError)


# -- inline -----------------------------------------------------------------------------------


def test_inline_runs_committed_work_and_never_rolled_back_work(ctx) -> None:  # type: ignore[no-untyped-def]
    with testing.inline() as drains:
        with tenant_scope(ctx.org_id):
            item, _ = api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "ok"}, lane="inline")
            assert _started() == []  # not before the commit
        assert _started() == [str(item.id)]
        with pytest.raises(ZeroDivisionError), tenant_scope(ctx.org_id):
            api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {"action": "ok"}, lane="inline")
            1 / 0  # noqa: B018
        api.enqueue_many(ctx, [api.NewItem("TEST_SCRIPTED_SYNC", {}, lane="inline")] * 2)
    assert [d.done for d in drains] == [1, 2]
    assert len(_started()) == 3
    # Outside the block nothing runs on its own.
    api.enqueue(ctx, "TEST_SCRIPTED_SYNC", {}, lane="inline")
    assert len(_started()) == 3


# -- tenants and tasks ------------------------------------------------------------------------


def test_a_tenant_block_names_the_context_for_tasks_and_row_level_security(ctx) -> None:  # type: ignore[no-untyped-def]
    with testing.tenant(ctx.org_id) as named:
        assert named.org_id == ctx.org_id
        result = tasks.add.enqueue(2, 3)
        # Row-level security lets the tenant's own rows through, on the everyday login.
        assert WorkItem.objects.filter(id=result.id).count() == 1
    [item] = testing.assert_enqueued(task=tasks.add, tenant=ctx.org_id)
    assert item.payload["args"] == [2, 3]
    testing.refute_enqueued(task=tasks.note)

    drained = testing.drain("default", ["DJANGO_TASK"])
    assert drained.done == 1
    with testing.tenant(ctx.org_id):
        assert tasks.add.get_result(result.id).return_value == 5


def test_a_context_needs_a_tenant_where_the_site_has_tenants() -> None:
    with pytest.raises(ValueError, match="name the one to act for"):
        testing.context()
