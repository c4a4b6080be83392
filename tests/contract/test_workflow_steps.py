"""A workflow's steps are ordinary items once pending: retries, snoozes, the sweep's requeue,
concurrency keys and tenants apply to them as to any item; only ending one moves its children.
The gauges count waiting steps, and the purge never takes one."""

from __future__ import annotations

import datetime
import json

import pytest
from django.core.management import call_command
from django.db import connections

from tests.helpers import back_date, row
from workers.sweep.clock import db_now_minus
from workqueue import api, claim, maintenance, settle
from workqueue.models import Status
from workqueue.workflows import Workflow
from wqcore.conf import system_alias

pytestmark = pytest.mark.usefixtures("committed")


def _chain(ctx, *ns: int, **options):  # type: ignore[no-untyped-def]
    wf = Workflow()
    steps = wf.chain(*(api.NewItem("NOOP", {"n": n}, **options) for n in ns))
    declared = api.enqueue_workflow(ctx, wf)
    return [declared[step] for step in steps]


def _claim_one(rctx):  # type: ignore[no-untyped-def]
    held = claim.claim(rctx, "default", ["NOOP"], "w1", 30, 10)
    assert len(held) <= 1
    return held[0] if held else None


def test_a_retried_step_holds_the_next_until_it_is_done(ctx, worker_rctx) -> None:
    first, second = _chain(ctx, 1, 2)
    item_ctx, held = _claim_one(worker_rctx)
    settle.fail(item_ctx, held, "flaky", delay_s=0)
    assert row(first).status == Status.PENDING and row(second).status == Status.WAITING
    item_ctx, held = _claim_one(worker_rctx)
    assert (held.id, held.attempts) == (first, 2)
    settle.complete(item_ctx, held)
    assert row(second).status == Status.PENDING


def test_a_snoozed_or_released_step_holds_the_next(ctx, worker_rctx) -> None:
    first, second = _chain(ctx, 1, 2)
    item_ctx, held = _claim_one(worker_rctx)
    settle.defer(item_ctx, held, 0)
    item_ctx, held = _claim_one(worker_rctx)
    settle.release(item_ctx, held, "shutting down")
    assert row(second).status == Status.WAITING
    assert _claim_one(worker_rctx)[1].id == first


def test_a_step_whose_worker_died_with_attempts_spent_is_dead_and_holds_the_next(
    ctx, worker_rctx
) -> None:
    wf = Workflow()
    first = wf.step("NOOP", {"n": 1}, max_attempts=1)
    after = wf.step("NOOP", {"n": 2}, after=[first])
    finally_ = wf.step("NOOP", {"n": 3}, after_finished=[first])
    declared = api.enqueue_workflow(ctx, wf)
    item_ctx, held = _claim_one(worker_rctx)
    back_date(held.id, lease_expires_at=5)
    assert maintenance.requeue_stale(item_ctx).dead_lettered == 1
    assert row(declared[first]).status == Status.FAILED
    assert row(declared[after]).status == Status.WAITING
    assert row(declared[finally_]).status == Status.PENDING


def test_a_gone_holders_step_with_attempts_spent_is_dead_and_releases_what_needs_it_finished(
    ctx, worker_rctx
) -> None:
    wf = Workflow()
    first = wf.step("NOOP", {"n": 1}, max_attempts=1)
    after = wf.step("NOOP", {"n": 2}, after=[first])
    finally_ = wf.step("NOOP", {"n": 3}, after_finished=[first])
    declared = api.enqueue_workflow(ctx, wf)
    item_ctx, _ = _claim_one(worker_rctx)
    assert maintenance.requeue_held(item_ctx, ["w1"], db_now_minus(-1)).dead_lettered == 1
    assert row(declared[first]).status == Status.FAILED
    assert row(declared[after]).status == Status.WAITING
    assert row(declared[finally_]).status == Status.PENDING


def test_steps_with_one_concurrency_key_run_one_at_a_time(ctx, worker_rctx) -> None:
    wf = Workflow()
    first = wf.step("NOOP", {"n": 1})
    wf.group(
        [api.NewItem("NOOP", {"n": n}, concurrency_key="shop-7") for n in (2, 3)], after=[first]
    )
    api.enqueue_workflow(ctx, wf)
    item_ctx, held = _claim_one(worker_rctx)
    settle.complete(item_ctx, held)
    item_ctx, held = _claim_one(worker_rctx)
    assert held.payload["n"] in (2, 3) and _claim_one(worker_rctx) is None
    settle.complete(item_ctx, held)
    assert _claim_one(worker_rctx) is not None


def test_a_tenants_steps_are_its_own(ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    [mine] = _chain(ctx, 1)
    with pytest.raises(api.NotFound):
        api.cancel_workflow(other, row(mine).workflow_id)
    assert api.read_parents(other, mine).parents == []


def test_waiting_steps_are_counted_as_waiting_and_never_purged(ctx, worker_rctx) -> None:
    # A dead step purged before anyone requeued it takes its edges along: what waited for it
    # to be done waits on (cancel the workflow to end it), and is never purged itself.
    _first, second = _chain(ctx, 1, 2)
    gauges = maintenance.read_gauges(worker_rctx)
    assert gauges.counts[("default", "NOOP", "waiting")] == 1
    far_future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    back_date(second, updated_at=10 * 86400)
    with pytest.raises(ValueError, match="only ended items are purged, not pending, waiting"):
        maintenance.purge_items(worker_rctx, far_future, statuses=("done", "waiting", "pending"))
    item_ctx, held = _claim_one(worker_rctx)
    settle.fail(item_ctx, held, "gone", permanent=True)
    ended = tuple(maintenance.PURGEABLE)
    assert maintenance.purge_items(worker_rctx, far_future, statuses=ended) == 1
    assert row(second).status == Status.WAITING
    with connections[system_alias()].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM workqueue_dependency")
        assert cursor.fetchone()[0] == 0


def test_the_purge_takes_a_steps_edges_with_it(ctx, worker_rctx) -> None:
    _chain(ctx, 1, 2)
    for _ in range(2):
        item_ctx, held = _claim_one(worker_rctx)
        settle.complete(item_ctx, held)
    far_future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    assert maintenance.purge_items(worker_rctx, far_future) == 2
    with connections[system_alias()].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM workqueue_dependency")
        assert cursor.fetchone()[0] == 0


def test_manage_py_queue_shows_waiting_steps(ctx, capsys) -> None:  # type: ignore[no-untyped-def]
    _chain(ctx, 1, 2, 3)
    call_command("queue", "stats", "--json")
    stats = json.loads(capsys.readouterr().out)
    assert stats["by_status"] == {"pending": 1, "waiting": 2}
    call_command("queue", "stats")
    table = capsys.readouterr().out
    assert "waiting" in table.splitlines()[0]
