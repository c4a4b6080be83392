"""Time limits, cancel and snooze against real ``runworker`` processes (issue 20).

The kinds are ``tests/runtime/subprocess_kinds.py``'s: ``TEST_TIMED`` / ``TEST_TIMED_SYNC``
have a one-second time limit; ``TEST_LONG`` / ``TEST_LONG_SYNC`` the site's default. The sync
handlers sleep without looking at ``run.cancelled`` (a thread Python cannot stop), then try
to complete their item themselves: a late write the claim token must refuse.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from audit.models import AuditEntry
from tenancy.contexts import OpContext
from tests.runtime.subprocess_kinds import LIMIT_KINDS, LONG, LONG_SYNC, TIMED, TIMED_SYNC, noted
from tests.runtime.support import PYTHON, ROOT, crash_tracebacks, subprocess_env
from workqueue import api
from workqueue.cancel import is_cancel_requested
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

# A short lease: renewals every second, so a cancel request is learnt within about one.
LEASE_S = 3.0
RENEWAL_S = LEASE_S / 3


def _wait(predicate: Callable[[], bool], timeout_s: float = 60) -> float:
    """Wait for ``predicate``; returns how long it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if predicate():
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError("timed out")


def _stored(item_id: object) -> WorkItem:
    return WorkItem.objects.using("admin").get(pk=item_id)


def _start(**env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", LIMIT_KINDS, "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(
            handlers=True,
            WORKER_POLL_INTERVAL_MS="50",
            WORKER_LEASE_S=str(LEASE_S),
            WORKER_SWEEP="false",
            LOG_LEVEL="INFO",
            **env,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


def _events(log: str, item_id: object) -> list[tuple[int, str]]:
    return [(attempt, what) for i, attempt, what in noted(log) if i == str(item_id)]


@pytest.mark.parametrize("kind", [TIMED, TIMED_SYNC], ids=["async", "sync"])
def test_a_handler_past_its_time_limit_is_cancelled_retried_then_dead_lettered(
    ctx: OpContext, tmp_path: Path, kind: api.Kind
) -> None:
    log = str(tmp_path / "runs.log")
    slow, _ = api.enqueue(ctx, kind.name, {"action": "sleep", "seconds": 4, "log": log})
    proc = _start()
    try:
        _wait(lambda: _stored(slow.id).status == Status.FAILED)
        failed = _stored(slow.id)
        assert failed.attempts == 2
        assert failed.last_error.startswith("TimeoutError: the handler ran past its time limit")
        starts = [a for a, what in _events(log, slow.id) if what == "start"]
        assert starts == [1, 2], "retried once, then a dead letter"
        assert (
            AuditEntry.objects.using("admin")
            .filter(subject_id=str(slow.id), action="work.dead_lettered")
            .exists()
        )
        # The worker is healthy: it goes on running other items.
        ok, _ = api.enqueue(ctx, kind.name, {"log": log})
        _wait(lambda: _stored(ok.id).status == Status.DONE)
        assert proc.poll() is None
        if kind is TIMED_SYNC:
            # Each abandoned thread slept on and then tried to complete its item: refused.
            _wait(lambda: sum(w == "late_write_refused" for _, w in _events(log, slow.id)) == 2)
            assert not any(w == "late_write_accepted" for _, w in _events(log, slow.id))
        else:
            assert [w for _, w in _events(log, slow.id) if w == "cancelled"] == ["cancelled"] * 2
    finally:
        out = _stop(proc)
    assert "item_timed_out" in out and not crash_tracebacks(out), out[-3000:]
    if kind is TIMED_SYNC:
        assert "handler_thread_abandoned" in out and "handler_thread_returned" in out


def test_a_side_effect_then_a_timeout_is_a_dead_letter_at_once(
    ctx: OpContext, tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    item, _ = api.enqueue(ctx, TIMED.name, {"action": "side_effect", "seconds": 5, "log": log})
    proc = _start()
    try:
        _wait(lambda: _stored(item.id).status == Status.FAILED)
        stored = _stored(item.id)
        assert stored.attempts == 1 and "TimeoutError" in stored.last_error
        assert stored.last_error.startswith("failed after a side effect")
    finally:
        _stop(proc)


def test_a_cancelled_pending_item_is_never_claimed(ctx: OpContext, tmp_path: Path) -> None:
    log = str(tmp_path / "runs.log")
    cancelled, _ = api.enqueue(ctx, LONG.name, {"log": log})
    kept, _ = api.enqueue(ctx, LONG.name, {"log": log})
    api.cancel(ctx, cancelled.id)
    done = subprocess.run(
        [PYTHON, "manage.py", "runworker", LIMIT_KINDS, "--once", "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(handlers=True),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _stored(kept.id).status == Status.DONE
    stored = _stored(cancelled.id)
    assert (stored.status, stored.attempts, stored.claim_token) == (Status.CANCELLED, 0, None)
    assert _events(log, cancelled.id) == []


@pytest.mark.parametrize("kind", [LONG, LONG_SYNC], ids=["async", "sync"])
def test_a_running_item_is_cancelled_within_a_renewal_and_its_late_write_refused(
    ctx: OpContext, tmp_path: Path, kind: api.Kind
) -> None:
    log = str(tmp_path / "runs.log")
    seconds = 60 if kind is LONG else 4
    item, _ = api.enqueue(ctx, kind.name, {"action": "sleep", "seconds": seconds, "log": log})
    proc = _start()
    try:
        _wait(lambda: "start" in [w for _, w in _events(log, item.id)])
        asked = api.cancel(ctx, item.id)
        assert is_cancel_requested(asked)
        took = _wait(lambda: _stored(item.id).status == Status.CANCELLED)
        print(
            f"{kind.name}: cancelled {took:.2f} s after the request (renewal every {RENEWAL_S} s)"
        )
        # Within one renewal interval, give or take the shared machine's scheduling.
        assert took < RENEWAL_S + 5.0
        stored = _stored(item.id)
        assert stored.claim_token is None and stored.attempts == 1
        actions = list(
            AuditEntry.objects.using("admin")
            .filter(subject_id=str(item.id))
            .order_by("created_at")
            .values_list("action", flat=True)
        )
        assert actions == ["work.cancel_requested", "work.cancelled"]
        if kind is LONG_SYNC:
            _wait(lambda: "late_write_refused" in [w for _, w in _events(log, item.id)])
            assert _stored(item.id).status == Status.CANCELLED
        else:
            assert "cancelled" in [w for _, w in _events(log, item.id)]
        ok, _ = api.enqueue(ctx, kind.name, {"log": log})
        _wait(lambda: _stored(ok.id).status == Status.DONE)
    finally:
        out = _stop(proc)
    assert "item_cancel_requested" in out and not crash_tracebacks(out), out[-3000:]


def test_cancelling_a_run_that_marked_a_side_effect_dead_letters_it(
    ctx: OpContext, tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    item, _ = api.enqueue(ctx, LONG.name, {"action": "side_effect", "seconds": 60, "log": log})
    proc = _start()
    try:
        _wait(lambda: "start" in [w for _, w in _events(log, item.id)])
        api.cancel(ctx, item.id)
        _wait(lambda: _stored(item.id).status == Status.FAILED)
        assert "cancelled as asked after a side effect" in _stored(item.id).last_error
    finally:
        _stop(proc)


def test_snooze_puts_the_item_back_without_spending_an_attempt(
    ctx: OpContext, tmp_path: Path
) -> None:
    log = str(tmp_path / "runs.log")
    # TEST_LONG allows one attempt: had the snooze spent it, the second run would be its last.
    item, _ = api.enqueue(ctx, LONG.name, {"action": "snooze_once", "seconds": 1, "log": log})
    proc = _start()
    try:
        _wait(lambda: _stored(item.id).status == Status.DONE)
    finally:
        _stop(proc)
    assert _events(log, item.id) == [(1, "start"), (1, "snooze"), (1, "start"), (1, "end")]
    assert _stored(item.id).attempts == 1


def test_a_django_task_past_its_time_limit_fails_as_timeout_error(ctx: OpContext) -> None:
    from tenancy.current import using_context
    from tests.runtime import rogue_tasks

    with using_context(ctx):
        ids = [rogue_tasks.sleeps_async.enqueue(5).id, rogue_tasks.sleeps.enqueue(3).id]
        ok = rogue_tasks.adds.enqueue(1, 2)
    assert all(_stored(i).payload["timeout_s"] == 1.0 for i in ids)
    proc = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "DJANGO_TASK", "--metrics-port", "-1"],
        cwd=ROOT,
        env=subprocess_env(WORKER_POLL_INTERVAL_MS="50", WORKER_SWEEP="false", LOG_LEVEL="INFO"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait(lambda: all(_stored(i).status == Status.FAILED for i in ids))
        for item_id in ids:
            stored = _stored(item_id)
            assert stored.attempts == 2 and stored.last_error.startswith("TimeoutError:")
        _wait(lambda: _stored(ok.id).status == Status.DONE)
        assert proc.poll() is None
    finally:
        out = _stop(proc)
    # What must hold: each item's timeout was said, with no crash (its attempts are asserted
    # above), not how many lines the worker wrote.
    said = [line for line in out.splitlines() if "item_timed_out" in line]
    assert all(any(str(i) in line for line in said) for i in ids), out[-3000:]
    assert not crash_tracebacks(out), out[-3000:]
