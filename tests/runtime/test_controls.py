"""The claim's controls against real ``runworker`` processes: a paused lane is claimed by none of
three workers and is claimed again as soon as it is resumed (the resume's notice wakes them: their
poll is a minute); twenty items sharing a concurrency key, four workers: never two running at
once, all done, in order; a kind capped at three never has four running."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connections

from tests.runtime.subprocess_kinds import CAPPED_RUN, KEYED, RUNS_TABLE
from tests.runtime.support import PYTHON, ROOT, count, subprocess_env
from workers.models import Worker as WorkerRow
from workers.models import WorkerState
from workqueue import api, pauses
from workqueue.models import Status, WorkItem
from workqueue.pauses import pause

pytestmark = pytest.mark.usefixtures("committed", "control_kinds")


@pytest.fixture
def control_kinds() -> Iterator[None]:
    """The keyed and capped kinds, registered in this process for these tests only."""
    from workqueue import kinds

    for kind in (KEYED, CAPPED_RUN):
        api.register(kind)
    yield
    for kind in (KEYED, CAPPED_RUN):
        kinds._KINDS.pop(kind.name, None)


def _wait(predicate: Callable[[], bool], timeout_s: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or predicate}")


@pytest.fixture
def runs_table(committed) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """The table the handlers record their runs in, and the two functions they count claimed
    items through (as the owner, across tenants: the everyday login sees only one tenant)."""
    app = connections["default"].settings_dict["USER"]
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {RUNS_TABLE} (item_id uuid, n integer, event text, running bigint,"
            " at timestamptz)"
        )
        cursor.execute(f'GRANT INSERT, SELECT ON {RUNS_TABLE} TO "{app}"')
        for name, column in (("key", "concurrency_key"), ("kind", "kind")):
            cursor.execute(
                f"CREATE FUNCTION runtime_claimed_{name}(v text) RETURNS bigint"
                " LANGUAGE sql SECURITY DEFINER SET app.all_tenants = 'on' AS"
                f" $$ SELECT count(*) FROM workqueue_workitem WHERE status = 'claimed'"
                f" AND {column} = v $$"
            )
            cursor.execute(f'GRANT EXECUTE ON FUNCTION runtime_claimed_{name}(text) TO "{app}"')
    try:
        yield
    finally:
        with connections["admin"].cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {RUNS_TABLE}")
            cursor.execute("DROP FUNCTION IF EXISTS runtime_claimed_key(text)")
            cursor.execute("DROP FUNCTION IF EXISTS runtime_claimed_kind(text)")


def _runs() -> list[tuple[str, int, str, int, object]]:
    with connections["admin"].cursor() as cursor:
        cursor.execute(f"SELECT item_id::text, n, event, running, at FROM {RUNS_TABLE} ORDER BY at")
        return list(cursor.fetchall())


def _workers(n: int, kind: str, lane: str, **env: str) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [PYTHON, "manage.py", "runworker", kind, "--lane", lane, "--capacity", "4"],
            cwd=ROOT,
            env=subprocess_env(
                handlers=True,
                WORKER_HEARTBEAT_INTERVAL_S="0.5",
                WORKER_METRICS_PORT="0",
                WORKQUEUE_LANES=f"default,{lane}",
                **env,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(n)
    ]


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _live(n: int) -> Callable[[], bool]:
    def check() -> bool:
        live = WorkerRow.objects.using("admin").filter(state=WorkerState.RUNNING).count()
        return live >= n

    return check


def _db_now():  # type: ignore[no-untyped-def]
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def test_a_paused_lane_is_claimed_by_no_worker_and_resumes_at_the_notice(ctx, capsys) -> None:
    # A poll of a minute: within the test, only a notice wakes a worker.
    procs = _workers(3, "NOOP", "default", WORKER_POLL_INTERVAL_MS="60000")
    try:
        _wait(_live(3), what="three live workers")
        first, _ = api.enqueue(ctx, "NOOP", {})
        _wait(lambda: count(id=first.id, status=Status.DONE) == 1, what="the workers to serve")
        pause("operator", "default", reason="test")
        items = [api.enqueue(ctx, "NOOP", {"n": n})[0] for n in range(10)]
        # Each enqueue's notice woke the three workers; each claim took nothing.
        time.sleep(3)
        ids = [i.id for i in items]
        assert count(id__in=ids, status=Status.PENDING) == 10
        assert count(id__in=ids, attempts__gt=0) == 0
        resumed_at = _db_now()
        pauses.resume("operator", "default")
        _wait(lambda: count(id__in=ids, status=Status.DONE) == 10, 30, "the lane to drain")
        first_claim = min(
            WorkItem.objects.using("admin").filter(id__in=ids).values_list("updated_at", flat=True)
        )
        # updated_at is the completion; the claim came before it.
        latency = (first_claim - resumed_at).total_seconds()
        with capsys.disabled():
            print(f"\nresume -> first item done: {latency * 1000:.0f} ms (poll: 60 s)")
        # Under a minute's poll, only the resume's notice can have woken them this soon.
        assert latency < 30
    finally:
        _stop(procs)


def test_items_sharing_a_key_run_one_at_a_time_in_order(ctx, runs_table) -> None:
    items = api.enqueue_many(
        ctx,
        [
            api.NewItem(KEYED.name, {"n": n, "sleep_s": 0.05}, concurrency_key="shipment:42")
            for n in range(20)
        ],
    )
    ids = [item_id for item_id, _ in items]
    procs = _workers(4, KEYED.name, "keyed", WORKER_POLL_INTERVAL_MS="50")
    try:
        _wait(lambda: count(id__in=ids, status=Status.DONE) == 20, 120, "twenty keyed items")
    finally:
        _stop(procs)
    runs = _runs()
    assert len(runs) == 40
    # Never two at once: each start follows the previous end, and at each start and end the
    # database held exactly one claimed item of the key (this one).
    events = [event for _, _, event, _, _ in runs]
    assert events == ["start", "end"] * 20
    assert {running for _, _, _, running, _ in runs} == {1}
    # In order: the order they were enqueued.
    started = [n for _, n, event, _, _ in runs if event == "start"]
    assert started == list(range(20))


def test_a_kind_capped_at_three_never_has_four_running(make_ctx, runs_table) -> None:
    tenants = [make_ctx() for _ in range(3)]
    ids = []
    for n in range(24):
        item, _ = api.enqueue(tenants[n % 3], CAPPED_RUN.name, {"n": n, "sleep_s": 0.2})
        ids.append(item.id)
    procs = _workers(3, CAPPED_RUN.name, "capped_run", WORKER_POLL_INTERVAL_MS="50")
    try:
        _wait(lambda: count(id__in=ids, status=Status.DONE) == 24, 120, "the capped kind")
    finally:
        _stop(procs)
    runs = _runs()
    assert len(runs) == 48
    assert max(running for _, _, _, running, _ in runs) <= 3
    # Replaying starts and ends in the database's order: never four running.
    running, most = 0, 0
    for _, _, event, _, _ in runs:
        running += 1 if event == "start" else -1
        most = max(most, running)
    assert most <= 3
    assert most == 3  # and the cap was reached: three ran at once
