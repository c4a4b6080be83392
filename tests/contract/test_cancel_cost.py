"""What cancel costs the claim and the renewal, measured in one run (issue 20's closing note).

    bin/test tests/contract/test_cancel_cost.py -s

Prints, in one run on the same table: the claim (10 items per statement, the fair claim) at
10,000 waiting with nothing cancelled; right after a bulk cancel of 10,000 more of the same
lane (their rows left the pending partial indexes, but their dead entries stay there until a
VACUUM); and after the VACUUM; then the renewal of 100 held leases, the shipped statement (which
reports cancel requests) against the same statement without that column. Nothing is asserted
on the times: the machine is shared. It asserts only that the work was done.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable

from django.db import connections

from tenancy.contexts import OpContext
from workqueue import SQL_DIR, api
from workqueue.settle import EXTEND_LEASES, ExtendLeasesParams
from wqcore.statements import Statement
from wqcore.store import System, run

WAITING = 10_000
REPS = 40


def _payload(kind: str, i: int) -> dict[str, object]:
    if kind == "NOTIFY_SHIPMENT":
        return {"shipment_id": str(uuid.UUID(int=i + 1)), "version": 1}
    return {"n": i}


def _enqueue(ctx: OpContext, kind: str, n: int, lane: str) -> None:
    for start in range(0, n, 2000):
        batch = [
            api.NewItem(kind, _payload(kind, i), lane=lane) for i in range(start, start + 2000)
        ]
        api.enqueue_many(ctx, batch)


def _median_ms(fn: Callable[[], object], reps: int = REPS) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _vacuum() -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) workqueue_workitem")


def test_what_cancel_costs_the_claim_and_the_renewal(ctx: OpContext, worker_rctx) -> None:  # type: ignore[no-untyped-def]
    # Lane "base": 10,000 waiting. Lane "bench": 10,000 older items of another kind, then
    # 10,000 waiting; the older ones are cancelled in bulk (their dead entries lie in the
    # claim's path through the pending indexes until a VACUUM).
    _enqueue(ctx, "NOOP", WAITING, "base")
    _enqueue(ctx, "NOTIFY_SHIPMENT", WAITING, "bench")
    _enqueue(ctx, "NOOP", WAITING, "bench")
    _vacuum()

    def claim(lane: str) -> Callable[[], object]:
        return lambda: api.claim(worker_rctx, lane, ["NOOP"], "bench", 300, 10)

    claim("base")()  # prepared, planned
    baseline = _median_ms(claim("base"))
    started = time.perf_counter()
    bulk = api.cancel_matching(ctx, "NOTIFY_SHIPMENT", lane="bench")
    bulk_s = time.perf_counter() - started
    assert bulk.cancelled == WAITING and bulk.finished
    after_cancel = _median_ms(claim("bench"))
    _vacuum()
    after_vacuum = _median_ms(claim("bench"))

    held = [
        api.Fence.of(item)
        for _, item in api.claim(worker_rctx, "base", ["NOOP"], "bench", 300, 100)
    ]
    assert len(held) == 100
    # The same statement without the cancel column, run the same way (prepared, binary).
    without = Statement("extend_leases_without_cancel", ExtendLeasesParams, SQL_DIR)
    without.__dict__["sql"] = EXTEND_LEASES.sql.replace(
        ", w.cancel_requested_at IS NOT NULL AS cancel_requested", ""
    )
    assert without.sql != EXTEND_LEASES.sql
    params = ExtendLeasesParams(
        [f.org_id for f in held], [f.item_id for f in held], [f.claim_token for f in held], 300.0
    )

    def renew_shipped() -> object:
        return api.extend_leases(held, 300)

    def renew_without() -> object:
        def plan():  # type: ignore[no-untyped-def]
            return (yield System(without, params))

        return run(plan())

    renew_shipped()
    renew_without()
    shipped_ms, without_ms = _median_ms(renew_shipped), _median_ms(renew_without)
    print(
        f"\nclaim of 10 at {WAITING:,} waiting (median of {REPS}): {baseline:.2f} ms; "
        f"after a bulk cancel of {WAITING:,} more in the lane: {after_cancel:.2f} ms "
        f"({after_cancel / baseline:.2f}x); after VACUUM: {after_vacuum:.2f} ms "
        f"({after_vacuum / baseline:.2f}x)\n"
        f"bulk cancel of {WAITING:,} (1,000 per statement, audited): {bulk_s:.2f} s "
        f"({WAITING / bulk_s:,.0f} items/s)\n"
        f"renewal of 100 leases: {shipped_ms:.2f} ms with the cancel report, "
        f"{without_ms:.2f} ms without ({shipped_ms / without_ms:.2f}x)"
    )
