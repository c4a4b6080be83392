"""A rate limit against real ``runworker`` processes: two workers under 10/s on one rate key
hand out that key's items at the limit's pace (its burst, then one per interval), while
another key's items drain at once; waiting spends no attempt. The issue's figure (four workers
over 30 s) is ``bench/rate_limits.py``'s; this test is kept short."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connections

from tests.runtime.support import count
from tests.runtime.test_controls import _live, _stop, _wait, _workers
from workqueue import api
from workqueue.models import Status, WorkItem
from workqueue.rate_limits import set_rate_limit

pytestmark = pytest.mark.usefixtures("committed")

WINDOW_S = 5


def test_two_workers_hold_a_key_to_its_rate_while_another_key_drains(ctx) -> None:
    set_rate_limit("operator", "key", "acct", "10/s")  # burst 10
    procs = _workers(2, "NOOP", "default", WORKER_POLL_INTERVAL_MS="100")
    try:
        _wait(_live(2), what="two live workers")
        limited = [api.enqueue(ctx, "NOOP", {"n": n}, rate_key="acct")[0] for n in range(150)]
        free = [api.enqueue(ctx, "NOOP", {"n": n}, rate_key="other")[0] for n in range(60)]
        _wait(lambda: count(id__in=[i.id for i in free], status=Status.DONE) == 60, 30, "drain")
        time.sleep(WINDOW_S + 1)
    finally:
        _stop(procs)
    rows = WorkItem.objects.using("admin").filter(id__in=[i.id for i in limited])
    claimed = sorted(t for t in rows.values_list("claimed_at", flat=True) if t is not None)
    first = claimed[0]
    in_window = [t for t in claimed if t < first + timedelta(seconds=WINDOW_S)]
    # GCRA allows the burst (10) at once, then one per 100 ms: at most 10 + 50 in 5 s.
    assert 40 <= len(in_window) <= 60, len(in_window)
    assert rows.filter(attempts__gt=1).count() == 0
    assert rows.filter(status=Status.PENDING).exists()  # the limit held the rest back
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM workqueue_workitem WHERE status = 'failed'")
        assert cursor.fetchone()[0] == 0
