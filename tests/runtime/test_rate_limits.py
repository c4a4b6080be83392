"""Rate limits against real ``runworker`` processes, each with its own pools (as on separate
hosts: the database is all they share), every rate counted by the database's clock (the items'
``claimed_at``, the claim's ``now()``, which the limit's buckets are kept by too):

- four workers hold a key to 10/s (within 10% over 30 s) while another key and another kind,
  unlimited, drain meanwhile;
- a limit changed at run time takes effect within a second (loosened, tightened, cleared);
- a tenant's limit, and the limit of every tenant (``*``: each tenant a bucket of its own),
  leave the other tenants alone;
- no attempt is spent by waiting.

The workers poll once a minute: only notices and the limits' own moments (the rate wake) wake
them within a test."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest
from django.db import connections

from tests.runtime.subprocess_kinds import RETURNS
from tests.runtime.support import count
from tests.runtime.test_controls import _db_now, _live, _stop, _wait, _workers
from workqueue import api
from workqueue.models import Status, WorkItem
from workqueue.rate_limits import clear_rate_limit, set_rate_limit

pytestmark = pytest.mark.usefixtures("committed")

OPERATOR = "operator"
POLL_A_MINUTE = {"WORKER_POLL_INTERVAL_MS": "60000"}


def _enqueue(ctx, n: int, kind: str = "NOOP", **fields: str) -> list:  # type: ignore[no-untyped-def]
    items = [api.NewItem(kind, {}, **fields) for _ in range(n)]
    return [item_id for item_id, _outcome in api.enqueue_many(ctx, items)]


def _claimed_at(ids: Sequence[object]) -> list[datetime]:
    rows = WorkItem.objects.using("admin").filter(id__in=ids, claimed_at__isnull=False)
    return sorted(rows.values_list("claimed_at", flat=True))


def _between(times: list[datetime], after: datetime, until: datetime) -> int:
    """How many of ``times`` fall in (after, until]."""
    return sum(1 for t in times if after < t <= until)


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def _until_db_clock(moment: datetime) -> None:
    _wait(lambda: _db_now() >= moment, 120, f"the database's clock to pass {moment}")


def _no_attempt_spent_waiting(ids: Sequence[object]) -> None:
    rows = WorkItem.objects.using("admin").filter(id__in=ids)
    assert not rows.filter(attempts__gt=1).exists()
    assert not rows.filter(status=Status.PENDING, attempts__gt=0).exists()
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM workqueue_workitem WHERE status = 'failed'")
        assert cursor.fetchone()[0] == 0


def test_four_workers_hold_a_key_to_ten_a_second_while_the_rest_drains(ctx) -> None:
    set_rate_limit(OPERATOR, "key", "acct", "10/s")  # a burst of 10
    procs = _workers(4, f"NOOP,{RETURNS.name}", "default", **POLL_A_MINUTE)
    try:
        _wait(_live(4), what="four live workers")
        limited = _enqueue(ctx, 400, rate_key="acct")
        free = _enqueue(ctx, 300, rate_key="other") + _enqueue(ctx, 300, RETURNS.name)
        _wait(lambda: count(id__in=free, status=Status.DONE) == 600, 60, "the unlimited items")
        _wait(lambda: bool(_claimed_at(limited)), 30, "the first limited claim")
        first = _claimed_at(limited)[0]
        _until_db_clock(first + _s(31.5))
    finally:
        _stop(procs)
    times = _claimed_at(limited)
    # Never more than the limit allows: its burst, then one per 100 ms.
    assert _between(times, first - _s(1), first + _s(31)) <= 10 + 310
    # 10/s within 10% over the 30 s after the first burst's second.
    assert 270 <= _between(times, first + _s(1), first + _s(31)) <= 330
    # The other key and the other kind drained meanwhile, all of them.
    assert max(_claimed_at(free)) < first + _s(31)
    assert count(id__in=limited, status=Status.PENDING) > 0  # the limit held the rest back
    _no_attempt_spent_waiting(limited)


def test_a_limit_changed_at_run_time_takes_effect_within_a_second(ctx) -> None:
    set_rate_limit(OPERATOR, "key", "acct", "2/s", burst=1)
    procs = _workers(2, "NOOP", "default", **POLL_A_MINUTE)
    try:
        _wait(_live(2), what="two live workers")
        ids = _enqueue(ctx, 300, rate_key="acct")
        _wait(lambda: len(_claimed_at(ids)) >= 3, 30, "the first claims")
        loosened = set_rate_limit(OPERATOR, "key", "acct", "20/s").updated_at  # a burst of 20
        _until_db_clock(loosened + _s(2))
        tightened = set_rate_limit(OPERATOR, "key", "acct", "2/s", burst=1).updated_at
        _until_db_clock(tightened + _s(3))
        cleared = _db_now()
        clear_rate_limit(OPERATOR, "key", "acct")
        _wait(lambda: count(id__in=ids, status=Status.DONE) == 300, 60, "the rest to drain")
    finally:
        _stop(procs)
    times = _claimed_at(ids)
    # 2/s with a burst of 1 allows at most 3 in a second: loosened, 20 (its burst) go at once.
    assert _between(times, loosened, loosened + _s(1)) >= 20
    # Tightened: from a second on, 2/s (at most 1 + 2 per second).
    assert _between(times, tightened + _s(1), tightened + _s(3)) <= 5
    # Cleared: what waited goes at once.
    waiting = _between(times, cleared, times[-1])
    assert waiting > 100
    assert _between(times, cleared, cleared + _s(1)) >= 20
    _no_attempt_spent_waiting(ids)


def test_a_tenants_limit_and_every_tenants_leave_other_tenants_alone(ctx, make_ctx) -> None:
    other = make_ctx()
    set_rate_limit(OPERATOR, "tenant", str(ctx.org_id), "5/s", burst=2)
    procs = _workers(2, "NOOP", "default", **POLL_A_MINUTE)
    try:
        _wait(_live(2), what="two live workers")
        mine = _enqueue(ctx, 60)
        theirs = _enqueue(other, 60)
        _wait(lambda: count(id__in=theirs, status=Status.DONE) == 60, 30, "the other tenant's")
        _wait(lambda: bool(_claimed_at(mine)), 30, "the first limited claim")
        first = _claimed_at(mine)[0]
        _until_db_clock(first + _s(4))
        # Every tenant a bucket of its own (set before the tenant's own limit is cleared, so
        # its items are never unlimited in between).
        every = set_rate_limit(OPERATOR, "tenant", "*", "5/s", burst=2).updated_at
        clear_rate_limit(OPERATOR, "tenant", str(ctx.org_id))
        mine_later, theirs_later = _enqueue(ctx, 60), _enqueue(other, 60)
        _until_db_clock(every + _s(4.5))
    finally:
        _stop(procs)
    # The tenant's own limit: 5/s for it (at most its burst of 2 and 15 more in 3 s), the other
    # tenant's all done meanwhile.
    assert max(_claimed_at(theirs)) < first + _s(4)
    assert 13 <= _between(_claimed_at(mine), first + _s(1), first + _s(4)) <= 2 + 15
    # Every tenant's: 5/s each, side by side (one bucket for both would allow 17 in all).
    for ids in (mine + mine_later, theirs_later):
        assert 13 <= _between(_claimed_at(ids), every + _s(1), every + _s(4)) <= 2 + 15
    _no_attempt_spent_waiting(mine + mine_later + theirs_later)
