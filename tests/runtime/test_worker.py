"""The worker loop in process, against the real queue on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request

import pytest
from django.db import connections
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from audit.models import AuditEntry
from project.observability import add_span_processor
from tenancy.contexts import AppType, OpContext, RequestContext
from tests.helpers import fresh_async_connections, queue_settings
from tests.runtime.support import EVENTS, count, run_until, settings
from workers import liveness
from workers.sweep.config import SweepSettings
from workers.worker import Worker
from workqueue import api, runtime
from workqueue.models import Status, WorkItem


def _enqueue(ctx: OpContext, n: int = 1, kind: str = "TEST_SCRIPTED", **payload) -> list:
    return [api.enqueue(ctx, kind, dict(payload))[0] for _ in range(n)]


def _enqueue_closing(ctx: OpContext) -> list:
    """``_enqueue`` from a thread of its own, which closes the connection it opened there."""
    try:
        return _enqueue(ctx)
    finally:
        connections.close_all()


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_claims_wait_while_more_finished_items_than_the_capacity_are_unwritten(
    ctx, monkeypatch
) -> None:
    """Completion writes stall: the worker goes on claiming only until more finished items
    than its capacity wait for their write (a worker that dies then leaves few finished items
    to run again); once the writes go through, it drains the rest."""
    from workers import completing

    _enqueue(ctx, 40)
    stalled = {"on": True}
    complete_many = runtime.acomplete_many

    async def slow_complete_many(fences, results=None):  # type: ignore[no-untyped-def]
        while stalled["on"]:
            await asyncio.sleep(0.01)
        return await complete_many(fences, results)

    class Api:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(runtime, name)

        acomplete_many = staticmethod(slow_complete_many)

    monkeypatch.setattr(completing, "runtime", Api())
    worker = Worker(settings(capacity=4, claim_batch=4))
    seen: dict[str, int] = {"most": 0}

    def held_then_written() -> bool:
        claimed = count(status=Status.CLAIMED)
        seen["most"] = max(seen["most"], claimed)
        if stalled["on"] and len([e for e in EVENTS if e[1] == "start"]) >= 8:
            time.sleep(0.3)  # long enough for a claim that should not happen
            seen["most"] = max(seen["most"], count(status=Status.CLAIMED))
            stalled["on"] = False
        return count(status=Status.DONE) == 40

    asyncio.run(run_until(worker, held_then_written))
    # 4 running and finished, then 4 more while the first 4 are written: never a third batch.
    assert seen["most"] == 8


def test_the_worker_runs_within_its_capacity(ctx) -> None:
    _enqueue(ctx, 10, sleep_s=0.15)
    asyncio.run(run_until(Worker(settings(capacity=3)), lambda: count(status=Status.DONE) == 10))
    # Handlers running at once never exceed the capacity. (A finished item's row stays
    # claimed for the few milliseconds its completion waits to share a statement.)
    running, peak_running = 0, 0
    for _, event, _ in sorted(EVENTS, key=lambda e: e[2]):
        running += 1 if event == "start" else -1
        peak_running = max(peak_running, running)
    assert peak_running == 3


def test_an_async_worker_holds_two_claim_batches_and_claims_the_second_while_the_first_runs(
    ctx,
) -> None:
    """The default capacity of a worker whose handlers are all async (none using threads) is
    two claim batches: the claim after a full batch goes out at once, so the second batch is
    claimed and started while the first one's handlers still run, and never a third."""
    from workers.config import WorkerSettings

    assert WorkerSettings(kinds=("TEST_SCRIPTED",)).capacity == 200
    assert WorkerSettings(kinds=("TEST_SCRIPTED",), claim_batch=7).capacity == 14
    # a sync handler keeps one slot per thread and connection, as before
    assert WorkerSettings(kinds=("TEST_SCRIPTED_SYNC",), db_pool_size=12).capacity < 12
    _enqueue(ctx, 12, sleep_s=0.3)
    worker = Worker(settings(capacity=None, claim_batch=4))
    assert worker.settings.capacity == 8
    asyncio.run(run_until(worker, lambda: count(status=Status.DONE) == 12))
    events = sorted(EVENTS, key=lambda e: e[2])
    running, peak_running = 0, 0
    for _, event, _ in events:
        running += 1 if event == "start" else -1
        peak_running = max(peak_running, running)
    assert peak_running == 8
    starts = [e for e in events if e[1] == "start"]
    first_end = next(e[2] for e in events if e[1] == "end")
    assert starts[7][2] < first_end  # the second batch started before any of the first ended


def _claims_counted(  # type: ignore[no-untyped-def]
    monkeypatch, delay_s: float = 0.02, second_delay_s: float | None = None
) -> dict[str, float]:
    """Wrap the worker's claim: each one takes at least ``delay_s`` (so two overlap when they
    can; ``second_delay_s`` for the second claimer's), and the returned dict counts them:
    ``now`` on their way, ``peak``, ``calls``."""
    import sys

    seen = {"now": 0, "peak": 0, "calls": 0}
    real = runtime.aclaim

    def by_second_claimer() -> bool:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name == "_claim_while_full":
                return True
            frame = frame.f_back  # type: ignore[assignment]
        return False

    async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen["now"] += 1
        seen["calls"] += 1
        seen["peak"] = max(seen["peak"], seen["now"])
        slow = second_delay_s is not None and by_second_claimer()
        try:
            await asyncio.sleep(second_delay_s if slow else delay_s)  # type: ignore[arg-type]
            return await real(*args, **kwargs)
        finally:
            seen["now"] -= 1

    monkeypatch.setattr(runtime, "aclaim", counted)
    return seen


def test_while_claims_come_back_full_a_second_claim_goes_out_before_the_first_returns(
    ctx, monkeypatch
) -> None:
    """Issue 22: with room for two batches, a draining worker has two claims on their way at
    once (never three), every item runs once, and once the lane is empty the second claimer
    rests: an idle worker sends one claim at a time."""
    seen = _claims_counted(monkeypatch)
    _enqueue(ctx, 40)
    worker = Worker(settings(capacity=None, claim_batch=4, poll_interval_ms=30))
    assert worker.claim_loop.claimers == 2
    asyncio.run(run_until(worker, lambda: count(status=Status.DONE) == 40))
    assert seen["peak"] == 2
    assert set(WorkItem.objects.using("admin").values_list("attempts", flat=True)) == {1}
    starts = [e for e in EVENTS if e[1] == "start"]
    assert len(starts) == len({e[0] for e in starts}) == 40  # each item ran once

    # Idle: claims by the poll, one at a time.
    seen.update(peak=0, calls=0)
    idle_until = time.monotonic() + 0.5
    asyncio.run(run_until(Worker(worker.settings), lambda: time.monotonic() > idle_until))
    assert seen["calls"] >= 3 and seen["peak"] == 1


def test_a_worker_with_one_batch_of_room_claims_alone(ctx, monkeypatch) -> None:
    """A capacity under two batches (sync handlers' threads, a small --capacity) keeps one
    claimer: a second claim could only take what the first left room for."""
    seen = _claims_counted(monkeypatch)
    _enqueue(ctx, 20)
    worker = Worker(settings(capacity=6, claim_batch=4))
    assert worker.claim_loop.claimers == 1
    asyncio.run(run_until(worker, lambda: count(status=Status.DONE) == 20))
    assert seen["peak"] == 1


def test_a_worker_run_once_with_two_claimers_ends_when_the_lane_is_empty(ctx, monkeypatch) -> None:
    """``once`` mode (bench and tests run a worker to the end of its lane): the first claimer
    ends only when no claim of the second is on its way and nothing runs, and the worker then
    ends (before the fix, a second claim that found nothing left the first waiting forever)."""
    # The second claimer's claims are slow: the first finds the lane empty while one is on its
    # way, and that one then finds nothing either, after every item has ended.
    seen = _claims_counted(monkeypatch, delay_s=0.005, second_delay_s=0.3)
    _enqueue(ctx, 30)
    worker = Worker(settings(capacity=None, claim_batch=4, once=True))
    asyncio.run(asyncio.wait_for(worker.run(), timeout=30))
    assert count(status=Status.DONE) == 30
    assert seen["peak"] == 2


def test_failures_retry_dead_letter_and_side_effects_are_never_retried(ctx) -> None:
    [retry] = _enqueue(ctx, action="retry")
    [permanent] = _enqueue(ctx, action="permanent")
    [effect] = _enqueue(ctx, action="side_effect_then_fail")
    retried_before = _metric("workqueue_worker_retried_total", kind="TEST_SCRIPTED")

    def settled() -> bool:
        stored = WorkItem.objects.using("admin").in_bulk([retry.id, permanent.id, effect.id])
        return (
            stored[retry.id].attempts == 1
            and stored[retry.id].status == Status.PENDING
            and all(stored[i].status == Status.FAILED for i in (permanent.id, effect.id))
        )

    asyncio.run(run_until(Worker(settings()), settled))
    stored = WorkItem.objects.using("admin").in_bulk([retry.id, permanent.id, effect.id])
    assert stored[effect.id].attempts == 1  # dead-lettered on its first failure
    assert "not retried automatically" in stored[effect.id].last_error
    assert stored[permanent.id].attempts == 1
    assert stored[retry.id].available_at > stored[retry.id].updated_at  # waits its delay
    audited = set(AuditEntry.objects.using("admin").values_list("subject_id", flat=True))
    assert audited == {str(permanent.id), str(effect.id)}
    assert _metric("workqueue_worker_retried_total", kind="TEST_SCRIPTED") == retried_before + 1


def test_an_item_of_a_kind_the_worker_cannot_run_is_released_not_failed(ctx) -> None:
    [item] = _enqueue(ctx, kind="TEST_UNHANDLED")
    worker = Worker(settings("TEST_SCRIPTED", "TEST_UNHANDLED"))

    def released() -> bool:
        stored = WorkItem.objects.using("admin").get(pk=item.id)
        return stored.status == Status.PENDING and "does not handle" in stored.last_error

    asyncio.run(run_until(worker, released))
    stored = WorkItem.objects.using("admin").get(pk=item.id)
    assert stored.attempts == 0 and stored.status == Status.PENDING


async def _until_offered(worker: Worker, timeout_s: float = 20.0, offered: bool = True) -> None:
    """Until the worker listens and its claim loop waits idle with an offer standing for the
    listener's thread (a notice now is claimed there). ``offered`` False: the loop makes no
    offer (a cap it knows of), so until it listens and its first claim has come and gone."""
    deadline = time.monotonic() + timeout_s
    if not offered:
        while not worker.listener.listening.is_set():
            assert time.monotonic() < deadline, "the worker never listened"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        return
    while not (worker.listener.listening.is_set() and worker.claim_loop.woken.standing):
        assert time.monotonic() < deadline, "the worker never waited idle, listening"
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # settled: no wake of the listener's connect still on its way
    while not worker.claim_loop.woken.standing:
        assert time.monotonic() < deadline, "the worker never waited idle, listening"
        await asyncio.sleep(0.01)


def _start_when_idle(ctx: OpContext, worker: Worker, offered: bool = True) -> tuple[str, float]:
    """Run ``worker`` idle, enqueue one item, run until it started, drain; the item's id and
    how long its start came after its enqueue's commit."""
    enqueued: dict[str, float | str] = {}

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        await _until_offered(worker, offered=offered)
        [item] = await asyncio.to_thread(_enqueue_closing, ctx)
        enqueued["at"] = time.monotonic()
        enqueued["id"] = str(item.id)
        for _ in range(500):
            if any(e[0] == enqueued["id"] for e in EVENTS):
                break
            await asyncio.sleep(0.01)
        worker.request_stop()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    item_id = str(enqueued["id"])
    [started] = [t for i, e, t in EVENTS if i == item_id and e == "start"]
    return item_id, started - float(enqueued["at"])


def test_an_idle_worker_starts_new_work_without_waiting_for_the_poll(ctx) -> None:
    _, after_s = _start_when_idle(ctx, Worker(settings(poll_interval_ms=60_000)))
    assert after_s < 20.0  # the notice woke it; the poll would take 60 s


def _spy_claim_first(monkeypatch, fail_first: bool = False) -> list[tuple[str, object]]:
    """Record each woken claim the listener's thread sends (``ClaimLoop._claim_first``): the
    thread it ran on and what it returned or raised. ``fail_first``: the first one raises as
    a lost connection does, before anything is sent."""
    import threading

    import psycopg

    from workers.claiming import ClaimLoop

    calls: list[tuple[str, object]] = []
    claim_first = ClaimLoop._claim_first

    def spy(self, offer, connection):  # type: ignore[no-untyped-def]
        thread = threading.current_thread().name
        if fail_first and not calls:
            calls.append((thread, "raised"))
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        result = claim_first(self, offer, connection)
        calls.append((thread, result))
        return result

    monkeypatch.setattr(ClaimLoop, "_claim_first", spy)
    return calls


def test_a_notice_to_an_idle_worker_is_claimed_on_the_listeners_thread(ctx, monkeypatch) -> None:
    """The idle worker's woken claim goes from the listener's thread (workers/woken.py): one
    claim there took the item, and the worker's loop started it."""
    calls = _spy_claim_first(monkeypatch)
    item_id, after_s = _start_when_idle(ctx, Worker(settings(poll_interval_ms=60_000)))
    assert after_s < 20.0  # not the poll's minute
    took = [(thread, result) for thread, result in calls if result]
    assert len(took) == 1, calls
    thread, claimed = took[0]
    assert thread == "worker-listen"
    assert [str(item.id) for _, item in claimed] == [item_id]  # type: ignore[attr-defined]
    assert WorkItem.objects.using("admin").get(pk=item_id).status == Status.DONE


def test_under_a_lane_cap_no_offer_stands_and_the_loop_claims(ctx, monkeypatch) -> None:
    """Under a lane's cap the woken claim must count what the lane holds: the thread's claim,
    begun with the offer, decides so without a statement, so the loop offers nothing; the
    notice wakes the loop and its own woken claim, which counts it, takes the item at once."""
    calls = _spy_claim_first(monkeypatch)
    with queue_settings(LANE_CAPS={"default": 10}):
        worker = Worker(settings(poll_interval_ms=60_000))
        item_id, after_s = _start_when_idle(ctx, worker, offered=False)
    assert after_s < 20.0  # not the poll's minute
    assert calls == []
    assert WorkItem.objects.using("admin").get(pk=item_id).status == Status.DONE


def test_a_woken_claim_that_fails_on_the_thread_is_an_outage_and_the_next_claim_takes_it(
    ctx, monkeypatch
) -> None:
    """The thread's claim meets a lost connection: the outage account hears of it and the loop
    backs off, as after any failed claim; the next notice ends the backoff and the loop's own
    claim takes the item."""
    calls = _spy_claim_first(monkeypatch, fail_first=True)
    worker = Worker(settings(poll_interval_ms=60_000))
    ids: list[str] = []

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        await _until_offered(worker)
        [first] = await asyncio.to_thread(_enqueue_closing, ctx)
        ids.append(str(first.id))
        for _ in range(500):
            if calls:
                break
            await asyncio.sleep(0.01)
        [second] = await asyncio.to_thread(_enqueue_closing, ctx)  # its notice wakes the loop
        ids.append(str(second.id))
        for _ in range(500):
            if all(any(e[0] == i and e[1] == "start" for e in EVENTS) for i in ids):
                break
            await asyncio.sleep(0.01)
        worker.request_stop()
        await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    assert calls[0] == ("worker-listen", "raised")
    assert worker.outage.began == 1
    for item_id in ids:
        assert WorkItem.objects.using("admin").get(pk=item_id).status == Status.DONE


def test_a_woken_claim_delivered_after_the_liveness_lock_changed_is_handed_back(
    ctx, monkeypatch
) -> None:
    """The thread claimed under one liveness lock, and the worker holds another by the time
    the claim reaches its loop (the sweep may have handed the first lock's items on): the item
    is handed back unrun, its attempt given back, and runs once under the new lock."""
    from workers.claiming import ClaimLoop

    claim_first = ClaimLoop._claim_first

    def claim_then_lose_the_lock(self, offer, connection):  # type: ignore[no-untyped-def]
        claimed = claim_first(self, offer, connection)
        lock = self.liveness
        if claimed and lock is not None and lock.held_epoch is not None:
            lock.held_epoch += 1000  # as if lost and taken again while the claim was on its way
        return claimed

    monkeypatch.setattr(ClaimLoop, "_claim_first", claim_then_lose_the_lock)
    worker = Worker(settings(poll_interval_ms=60_000))
    assert worker.liveness_lock is not None
    released_before = _metric(
        "workqueue_worker_released_total", kind="TEST_SCRIPTED", reason="liveness_lost"
    )
    item_id, _ = _start_when_idle(ctx, worker)
    released = _metric(
        "workqueue_worker_released_total", kind="TEST_SCRIPTED", reason="liveness_lost"
    )
    assert released == released_before + 1
    stored = WorkItem.objects.using("admin").get(pk=item_id)
    assert stored.status == Status.DONE and stored.attempts == 1
    assert [e for i, e, _ in EVENTS if i == item_id].count("start") == 1


def test_a_failed_liveness_publish_leaves_claiming_running(ctx, monkeypatch) -> None:
    monkeypatch.setattr(liveness, "_PUBLISH", "INSERT INTO no_such_table VALUES (1)")
    failed_before = _metric("workqueue_worker_liveness_publish_failed_total")
    _enqueue(ctx, 3, sleep_s=0.3)
    worker = Worker(settings())
    health: dict = {}

    def check() -> bool:
        port = worker.http.server_port if worker.http else None
        if port is None or count(status=Status.DONE) < 3:
            return False
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            health["status"], health["body"] = response.status, json.loads(response.read())
        return _metric("workqueue_worker_liveness_publish_failed_total") > failed_before

    asyncio.run(run_until(worker, check))
    assert health["status"] == 200 and health["body"]["healthy"] is True
    assert count(status=Status.DONE) == 3


def test_healthz_answers_503_when_the_beat_is_stale(ctx) -> None:
    worker = Worker(settings())
    worker.liveness.beat()
    worker.liveness.last_beat -= 60
    from workers.http import serve

    server = serve(worker.liveness, "127.0.0.1", 0)
    try:
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/healthz", timeout=2)
        raised.value.close()  # the error carries the answer, and its socket
        assert raised.value.code == 503
    finally:
        server.shutdown()
        server.server_close()


def test_each_item_gets_a_span_linked_to_the_enqueuing_trace(ctx) -> None:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    spans = InMemorySpanExporter()
    add_span_processor(SimpleSpanProcessor(spans))
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    linked = OpContext(
        org_id=ctx.org_id,
        user_id=ctx.user_id,
        role=ctx.role,
        rctx=RequestContext(app=ctx.rctx.app, traceparent=traceparent),
    )
    [item] = _enqueue(linked)
    asyncio.run(run_until(Worker(settings()), lambda: count(status=Status.DONE) == 1))
    [span] = [s for s in spans.get_finished_spans() if s.name == "work TEST_SCRIPTED"]
    assert span.attributes["workqueue.item_id"] == str(item.id)
    assert [format(link.context.trace_id, "032x") for link in span.links] == [
        "0af7651916cd43dd8448eb211c80319c"
    ]
    assert span.parent is None  # linked, never parented: the item outlives its request
    assert span.context.trace_id != 0x0AF7651916CD43DD8448EB211C80319C


def test_metrics_show_the_counters_moving(ctx) -> None:
    before = {
        name: _metric(name, kind="TEST_SCRIPTED")
        for name in ("workqueue_worker_claimed_total", "workqueue_worker_completed_total")
    }
    _enqueue(ctx, 4)
    worker = Worker(settings())
    page: dict[str, str] = {}

    def scraped() -> bool:
        if count(status=Status.DONE) < 4 or worker.http is None:
            return False
        time.sleep(0.05)  # the completion counter moves when the batch statement returns
        url = f"http://127.0.0.1:{worker.http.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as response:
            page["text"] = response.read().decode()
        return True

    asyncio.run(run_until(worker, scraped))
    for name, value in before.items():
        line = f'{name}{{kind="TEST_SCRIPTED"}} {value + 4}'
        assert line in page["text"], line
    assert "workqueue_worker_handler_seconds_bucket" in page["text"]
    assert "workqueue_worker_in_flight" in page["text"]


def test_shutdown_cancels_what_outlives_the_grace_and_releases_it(ctx) -> None:
    [slow] = _enqueue(ctx, sleep_s=30)
    [quick] = _enqueue(ctx, sleep_s=0.1)
    [slow_sync] = _enqueue(ctx, kind="TEST_SCRIPTED_SYNC", sleep_s=30)
    worker = Worker(settings("TEST_SCRIPTED", "TEST_SCRIPTED_SYNC", shutdown_grace_s=0.5))

    def all_started() -> bool:
        return count(status=Status.CLAIMED) + count(status=Status.DONE) == 3

    asyncio.run(run_until(worker, all_started))
    stored = WorkItem.objects.using("admin").in_bulk([slow.id, quick.id, slow_sync.id])
    assert stored[quick.id].status == Status.DONE
    for item_id in (slow.id, slow_sync.id):
        assert stored[item_id].status == Status.PENDING
        assert stored[item_id].attempts == 0
        assert "shut down before it finished" in stored[item_id].last_error
    events = {(i, e) for i, e, _ in EVENTS}
    assert (str(slow.id), "cancelled") in events  # async: really cancelled
    assert (str(slow_sync.id), "cancelled") in events  # sync: saw the flag


def test_a_lost_lease_cancels_the_running_item(ctx) -> None:
    [item] = _enqueue(ctx, sleep_s=30)
    worker = Worker(settings(lease_s=3.0, renew_timeout_s=0.5))

    def stolen_and_cancelled() -> bool:
        stored = WorkItem.objects.using("admin").get(pk=item.id)
        if stored.status == Status.CLAIMED and stored.claimed_by == worker.worker_id:
            # another holder takes it over: a new token, as a claim after requeue would mint
            WorkItem.objects.using("admin").filter(pk=item.id).update(
                claim_token="00000000-0000-4000-8000-000000000001", claimed_by="thief"
            )
        return any(e == (str(item.id), "cancelled") for e in [(i, ev) for i, ev, _ in EVENTS])

    asyncio.run(run_until(worker, stolen_and_cancelled))
    stored = WorkItem.objects.using("admin").get(pk=item.id)
    assert stored.claimed_by == "thief" and stored.status == Status.CLAIMED
    assert _metric("workqueue_worker_cancelled_total", kind="TEST_SCRIPTED", reason="conflict") >= 1


@pytest.fixture(autouse=True)
def _committed(committed: None) -> None:
    return None


def test_rctx_is_minted_per_claim(ctx, monkeypatch) -> None:
    from workers import claiming

    _enqueue(ctx, 2)
    contexts: list[RequestContext] = []
    original = runtime.aclaim

    async def spy(rctx, *args, **kwargs):
        contexts.append(rctx)
        return await original(rctx, *args, **kwargs)

    monkeypatch.setattr(claiming.runtime, "aclaim", spy)
    asyncio.run(run_until(Worker(settings()), lambda: count(status=Status.DONE) == 2))
    assert contexts and all(c.app.type == AppType.WORKER for c in contexts)
    assert len({c.request_id for c in contexts}) == len(contexts)


def test_work_of_a_gone_tenant_is_failed_never_run(ctx, make_ctx) -> None:
    from tenancy.models import Org

    [doomed] = _enqueue(ctx)
    [kept] = _enqueue(make_ctx())
    Org.objects.using("admin").get(pk=ctx.org_id).mark_gone()
    orphaned_before = _metric("workqueue_orphaned_total", kind="TEST_SCRIPTED")

    def settled() -> bool:
        stored = WorkItem.objects.using("admin").in_bulk([doomed.id, kept.id])
        return stored[doomed.id].status == Status.FAILED and stored[kept.id].status == Status.DONE

    asyncio.run(run_until(Worker(settings()), settled))
    assert str(doomed.id) not in {i for i, _, _ in EVENTS}
    assert WorkItem.objects.using("admin").get(pk=doomed.id).last_error == "tenant is gone"
    assert _metric("workqueue_orphaned_total", kind="TEST_SCRIPTED") == orphaned_before + 1


def _logins_down(down: bool) -> None:
    """Simulate a database outage for the worker's logins: refuse their new connections and
    end their sessions (the owner's connection, which the test uses, is untouched)."""
    login = "NOLOGIN" if down else "LOGIN"
    users = [connections[alias].settings_dict["USER"] for alias in ("default", "system")]
    with connections["admin"].cursor() as cursor:
        for user in users:
            cursor.execute(f'ALTER ROLE "{user}" {login}')
        if down:
            # Both logins at once, each call returning once the sessions have ended
            # (PostgreSQL 14+): no part of the worker can still be answered by one after this.
            cursor.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
                " WHERE usename = ANY(%s)",
                [users],
            )


def _logins_gone() -> None:
    users = [connections[alias].settings_dict["USER"] for alias in ("default", "system")]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = ANY(%s)", [users])
            if cursor.fetchone()[0] == 0:
                return
        _logins_down(True)
        time.sleep(0.02)


def test_a_database_outage_is_logged_as_two_lines_not_one_per_poll(ctx, caplog) -> None:
    """Issue 8.13: the parts that fail together report to one account of the outage; the
    claim loop backs off meanwhile."""

    worker = Worker(settings(poll_interval_ms=20, outage_backoff_max_s=0.5))
    during = _through_an_outage(ctx, caplog, worker)
    messages = [r.getMessage().split(" ", 1)[0] for r in during if r.name.startswith("workers")]
    assert messages == ["database_unreachable", "database_back"], [r.getMessage() for r in during]
    assert not any(r.exc_info for r in during if r.name.startswith("workers"))


def test_an_outage_the_sweep_and_the_pool_meet_is_two_lines_of_any_logger(ctx, caplog) -> None:
    """Issue 21: a server gone away under a sweeping worker (its lock attempt meets
    AdminShutdown, the pool fails to connect again and again) logs the same two lines, no
    traceback, no pool warning, no periodic_failed."""
    worker = Worker(
        settings(poll_interval_ms=20, outage_backoff_max_s=0.5, sweep=True),
        SweepSettings(interval_s=0.05, timeout_s=5),
    )
    parts: list[str] = []
    report = worker.outage.failed

    def failed(part: str, exc: BaseException) -> bool:
        parts.append(part)
        return report(part, exc)

    worker.outage.failed = failed  # type: ignore[method-assign]
    during = _through_an_outage(ctx, caplog, worker)
    lines = [f"{r.name} {r.getMessage()}" for r in during]
    assert [r.getMessage().split(" ", 1)[0] for r in during] == [
        "database_unreachable",
        "database_back",
    ], lines
    assert not any(r.exc_info for r in during), lines
    # The sweep met it too (its failures went to the outage, not to a line of their own).
    assert "sweep" in parts, parts


def test_a_sync_handlers_thread_checks_its_connection_after_an_outage(ctx) -> None:
    """The outage ended the connection a handler thread holds: the thread finds so before its
    next item's first statement and reconnects, instead of failing that item (an attempt
    spent), as each thread would after a restart or a failover."""
    worker = Worker(
        settings("TEST_QUERYING_SYNC", capacity=1, poll_interval_ms=20, outage_backoff_max_s=0.5)
    )
    [first] = _enqueue(ctx, kind="TEST_QUERYING_SYNC")
    after: list[api.WorkItem] = []

    def through_an_outage() -> bool:
        if not after and count(status=Status.DONE) == 1:
            _logins_down(True)
            _logins_gone()
            while not worker.outage.active:
                time.sleep(0.05)
            _logins_down(False)
            after.extend(_enqueue(ctx, kind="TEST_QUERYING_SYNC"))
        return bool(after) and count(status=Status.DONE) == 2

    try:
        asyncio.run(run_until(worker, through_an_outage, timeout_s=30))
    finally:
        _logins_down(False)
        for alias in ("default", "system"):
            connections[alias].close()
        fresh_async_connections()
    second = WorkItem.objects.using("admin").get(pk=after[0].id)
    assert (second.attempts, second.last_error) == (1, ""), second.last_error
    assert WorkItem.objects.using("admin").get(pk=first.id).attempts == 1


def _through_an_outage(ctx, caplog, worker: Worker) -> list:  # type: ignore[no-untyped-def]
    """Run ``worker`` through three seconds without its logins, then until an item enqueued
    after them is done; the records of WARNING or more, of any logger, in the meantime."""
    import logging

    phase = {"n": 0, "down_at": 0.0}

    def outage_then_back() -> bool:
        if phase["n"] == 0 and worker.http is not None:
            time.sleep(0.3)
            _logins_down(True)
            phase.update(n=1, down_at=time.monotonic())
        elif phase["n"] == 1 and time.monotonic() - phase["down_at"] <= 3:
            _logins_down(True)  # a session opened just before NOLOGIN took hold ends too
        elif phase["n"] == 1:
            _logins_gone()  # no ended session may still be on its way out when they come back
            _logins_down(False)
            phase["n"] = 2
            _enqueue(ctx, 1)
        elif phase["n"] == 2:
            return count(status=Status.DONE) == 1 and not worker.outage.active
        return False

    try:
        with caplog.at_level(logging.INFO):
            asyncio.run(run_until(worker, outage_then_back, timeout_s=30))
    finally:
        _logins_down(False)
        # This thread's own sessions on those logins were ended too, and so were those of
        # sync_to_async's thread (where later tests' async calls run their queries).
        for alias in ("default", "system"):
            connections[alias].close()
        fresh_async_connections()
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_workers_metrics_carry_its_own_counters_not_the_queues_gauges(ctx) -> None:
    _enqueue(ctx, 1, sleep_s=5)
    worker = Worker(settings())
    page: dict[str, str] = {}

    def scraped() -> bool:
        if worker.http is None or not worker.runner.jobs:
            return False
        url = f"http://127.0.0.1:{worker.http.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as response:
            page["text"] = response.read().decode()
        return True

    asyncio.run(run_until(worker, scraped))
    # The queue's gauges are the web's /metrics/queue alone: a sum() over the workers is right.
    for name in (
        "workqueue_queue_oldest_age_seconds",
        "workqueue_work_failed",
        "workqueue_outbox_lag_seconds",
        "workqueue_workers_live",
        "workqueue_items",
    ):
        assert name not in page["text"], name
    assert 'workqueue_worker_claimed_total{kind="TEST_SCRIPTED"}' in page["text"]
    # (Counted since this test process started: other tests' workers claimed some too.)
    wait = 'workqueue_worker_wait_seconds_count{kind="TEST_SCRIPTED",lane="default"}'
    assert wait in page["text"]
