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
from workqueue import claim as claims
from workqueue.fence import Fence
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


def _paired_ms(
    a: Callable[[], object], b: Callable[[], object], reps: int = REPS
) -> tuple[float, float]:
    """Medians of ``a`` and ``b`` run in turn (the order swapped each time), so the shared
    machine's drift falls on both."""
    times: tuple[list[float], list[float]] = ([], [])
    for rep in range(reps):
        order = ((0, a), (1, b)) if rep % 2 == 0 else ((1, b), (0, a))
        for index, fn in order:
            started = time.perf_counter()
            fn()
            times[index].append((time.perf_counter() - started) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


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
        return lambda: claims.claim(worker_rctx, lane, ["NOOP"], "bench", 300, 10)

    claim("base")()  # prepared, planned
    claim("bench")()
    started = time.perf_counter()
    bulk = api.cancel_matching(ctx, "NOTIFY_SHIPMENT", lane="bench")
    bulk_s = time.perf_counter() - started
    assert bulk.cancelled == WAITING and bulk.finished
    baseline, after_cancel = _paired_ms(claim("base"), claim("bench"))
    _vacuum()
    baseline_vacuumed, after_vacuum = _paired_ms(claim("base"), claim("bench"))

    held = [
        Fence.of(item) for _, item in claims.claim(worker_rctx, "base", ["NOOP"], "bench", 300, 100)
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

    def renewal(statement: Statement) -> Callable[[], object]:
        def plan():  # type: ignore[no-untyped-def]
            return (yield System(statement, params))

        return lambda: run(plan())

    for _ in range(3):  # prepared
        renewal(EXTEND_LEASES)()
        renewal(without)()
    shipped_ms, without_ms = _paired_ms(renewal(EXTEND_LEASES), renewal(without), REPS * 5)
    print(
        f"\nclaim of 10 at {WAITING:,} waiting (medians of {REPS}, in turn): "
        f"{baseline:.2f} ms in a lane with nothing cancelled, {after_cancel:.2f} ms in one "
        f"whose {WAITING:,} older items were just cancelled ({after_cancel / baseline:.2f}x); "
        f"after VACUUM {baseline_vacuumed:.2f} ms and {after_vacuum:.2f} ms "
        f"({after_vacuum / baseline_vacuumed:.2f}x)\n"
        f"bulk cancel of {WAITING:,} (1,000 per statement, audited): {bulk_s:.2f} s "
        f"({WAITING / bulk_s:,.0f} items/s)\n"
        f"renewal of 100 leases (medians of {REPS * 5}, in turn): {shipped_ms:.2f} ms with "
        f"the cancel report, {without_ms:.2f} ms without ({shipped_ms / without_ms:.2f}x)"
    )
