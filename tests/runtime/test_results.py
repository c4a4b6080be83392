"""A handler's return value becomes its item's result, through a real worker: in this process
(``workers.testing``: the same claim, fence and batched completion as ``runworker``) and in a
real ``runworker`` subprocess; what cannot be stored dead-letters the item, never retried."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from tests.runtime.subprocess_kinds import RETURNS, RETURNS_SYNC
from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workers import testing
from workqueue import api
from workqueue.models import Attempt, AttemptOutcome, Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

KINDS = [RETURNS.name, RETURNS_SYNC.name]


@pytest.mark.parametrize("kind", KINDS)
def test_what_a_handler_returns_is_its_items_result(ctx, kind: str) -> None:  # type: ignore[no-untyped-def]
    value = {"invoice": "INV-7", "lines": [1, 2.5, None], "sent": True}
    ran = testing.perform(kind, {"value": value}, ctx=ctx)
    assert (ran.ended, ran.result) == ("done", value)
    assert api.result_of(ctx, ran.item.id) == value
    plain = testing.perform(kind, {}, ctx=ctx)  # returns None: no result
    assert (plain.ended, plain.result) == ("done", None)
    both = api.results_of(ctx, [ran.item.id, plain.item.id])
    assert both == {ran.item.id: value, plain.item.id: None}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("make", "error"),
    [
        ("set", "result.tags: a set is not JSON; return str, int, float, bool, None, or lists"),
        ("nan", "result.ratio: NaN and infinity cannot be stored (JSON has no such numbers)"),
        ("big", "result: 262145 bytes of JSON, the limit is 262144; return less (an id, a URL)"),
    ],
)
def test_a_result_that_cannot_be_stored_dead_letters_the_item_at_once(  # type: ignore[no-untyped-def]
    ctx, kind: str, make: str, error: str
) -> None:
    ran = testing.perform(kind, {"make": make}, ctx=ctx, raise_failures=False)
    assert ran.ended == "dead_lettered"
    assert isinstance(ran.exception, api.WorkQueueError) and str(ran.exception).startswith(error)
    stored = WorkItem.objects.using("admin").get(pk=ran.item.id)
    assert (stored.status, stored.attempts, stored.max_attempts) == (Status.FAILED, 1, 3)
    assert stored.last_error.startswith(error) and stored.result is None
    [attempt] = Attempt.objects.using("admin").filter(item_id=stored.id)
    assert attempt.outcome == AttemptOutcome.DEAD_LETTERED and attempt.error == stored.last_error


def test_a_drain_that_meets_an_unstorable_result_fails_the_test_saying_why(ctx) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(testing.DrainFailed, match=r"result\.tags: a set is not JSON"):
        testing.perform(RETURNS.name, {"make": "set"}, ctx=ctx)


def test_a_runworker_process_stores_the_result_and_it_is_read_back_by_id(ctx) -> None:  # type: ignore[no-untyped-def]
    value = {"report": "https://example.com/r/42", "rows": 42}
    item, _ = api.enqueue(ctx, RETURNS.name, {"value": value})
    plain, _ = api.enqueue(ctx, RETURNS_SYNC.name, {"value": ["sync", 1]})
    proc = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", ",".join(KINDS), "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(handlers=True),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        done = WorkItem.objects.using("admin").filter(status=Status.DONE)
        while done.count() < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert api.result_of(ctx, item.id) == value
    assert api.results_of(ctx, [item.id, plain.id]) == {item.id: value, plain.id: ["sync", 1]}
