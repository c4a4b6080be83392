#!/usr/bin/env python3
"""What workflows cost: a group member's completion against a plain item's, a chain's
step-to-step latency beside the plain wake, and a group callback's delay after its last member.

    .venv/bin/python bench/workflow.py [--rounds 200] [--batch 100] [--groups 1000,100000]
                                       [--chain 200] [--callback-groups 1000,100000]
                                       [--database-url URL]

1. Completion cost, in process: ``complete_many`` of ``--batch`` claimed items, timed alone,
   alternating round by round between plain items, members of groups of each size (every
   member with two edges: its group's ``on_success`` and ``on_complete``), and plain items
   completed by a statement that calls the release function for every item
   (``bench/sql/complete_many_release_all.sql``: what the parent flag, ``has_dependents``,
   spares plain items). Groups of 1,000 are declared as many as the rounds use; one group of
   100,000 is declared whole (its declaration is timed too) and its first members completed.
2. Chain latency, one ``runworker``: a chain of ``--chain`` steps run through; each step's
   latency is the next step's claim minus the completion that released it (the database's
   clock: ``claimed_at`` - ``updated_at``); beside it the plain wake, ``--chain`` items enqueued
   one at a time, each once the one before is done (``claimed_at`` - ``created_at``).
3. Callback delay, two ``runworker`` processes: a group of each size drained with both
   callbacks; the delay is the first callback's claim minus the last member's completion.

Without ``--database-url`` it uses the embedded server in ``.pgdata/`` (``python -m
project.embedded start`` first), in a fresh database. Prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench" / "systems")]
DBNAME = "bench_workflow"
# The lanes of part 1: members and their callbacks apart from the plain items, so each claim
# takes one sort.
MEMBERS, CALLBACKS = "wf_members", "wf_callbacks"


def _pct(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct))]


def _group(ctx: Any, size: int, lane: str, cb_lane: str) -> tuple[Any, Any, float]:
    """Declare one group of ``size`` with both callbacks; (declared, group, seconds)."""
    from ours import KIND

    from workqueue.api import NewItem, Workflow, enqueue_workflow

    wf = Workflow()
    group = wf.group(
        [NewItem(KIND, {"seq": i}, lane=lane) for i in range(size)],
        on_success=NewItem(KIND, {"seq": -1}, lane=cb_lane),
        on_complete=NewItem(KIND, {"seq": -2}, lane=cb_lane),
    )
    started = time.perf_counter()
    declared = enqueue_workflow(ctx, wf)
    return declared, group, time.perf_counter() - started


def _alternate(
    ways: dict[str, tuple[tuple[str, list[str]], Any]], rounds: int, batch: int
) -> dict[str, list[float]]:
    """Each way's ms per item, round by round in turn: claim ``batch`` of its lane, then time
    its statement alone."""
    from tenancy.contexts import AppType, new_request_context
    from workqueue import runtime
    from workqueue.claim import claim
    from workqueue.fence import Fences
    from wqcore.store import System, execute

    rctx = new_request_context(AppType.WORKER)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for round_ in range(rounds * len(ways)):
        name = list(ways)[round_ % len(ways)]
        (claim_lane, kinds), statement = ways[name]
        held = claim(rctx, claim_lane, kinds, "bench-host:1:abcdef", 30, batch)
        fences = Fences.of([runtime.Fence.of(item) for _, item in held])
        # The fences, and None for what a statement takes besides (complete_many's results).
        params = statement.params(*fences, *[None] * (len(statement.params._fields) - 3))
        started = time.perf_counter()
        rows = execute(System(statement, params))
        times[name].append((time.perf_counter() - started) * 1000 / len(held))
        assert len(rows.rows) == len(held), (name, len(rows.rows), len(held))
    # The first runs of each prepare the statement.
    return {name: per_item[2:] for name, per_item in times.items()}


def completion_cost(ctx: Any, rounds: int, batch: int, sizes: list[int]) -> list[str]:
    """Part 1: median per-item cost of each kind of completion, alternating round by round."""
    import ours

    from workqueue.fence import Fences
    from workqueue.settle import COMPLETE_MANY, RECORD_ATTEMPTS
    from wqcore.statements import Statement

    release_all = Statement(
        "complete_many_release_all", Fences, REPO / "bench" / "sql", includes=(RECORD_ATTEMPTS,)
    )
    lines = []
    for size in sizes:
        lane = f"{MEMBERS}_{size}"
        declared_s = []
        for _ in range(max(1, rounds * batch // size)):
            declared_s.append(_group(ctx, size, lane, CALLBACKS)[2])
            if size * len(declared_s) >= rounds * batch:
                break
        lines.append(f"declare a group of {size:,} (one statement): {max(declared_s):.2f} s")
        ours.fill(ctx, 2 * rounds * batch)
        plain_lane = ("default", [ours.KIND])
        times = _alternate(
            {
                "plain": (plain_lane, COMPLETE_MANY),
                "plain, release for all": (plain_lane, release_all),
                f"member of {size:,}": ((lane, [ours.KIND]), COMPLETE_MANY),
            },
            rounds,
            batch,
        )
        plain = statistics.median(times["plain"])
        for name, per_item in times.items():
            median = statistics.median(per_item)
            lines.append(
                f"complete_many, {name:<24} {median * 1000:7.1f} us/item"
                f"  p90 {_pct(per_item, 0.9) * 1000:7.1f}  x{median / plain:.2f} of plain"
            )
        _clear()
    return lines


def _clear() -> None:
    from django.db import connections

    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "TRUNCATE workqueue_workitem, workqueue_dependency, workqueue_attempt CASCADE"
        )
        cursor.execute("VACUUM ANALYZE workqueue_workitem")


def _wait_done(ids: list[Any], timeout_s: float = 900) -> None:
    from workqueue.models import WorkItem

    deadline = time.monotonic() + timeout_s
    while WorkItem.objects.using("admin").filter(pk__in=ids[-1:]).exclude(status="done"):
        if time.monotonic() > deadline:
            raise RuntimeError("not done in time")
        time.sleep(0.01)


def _ms(rows: list[tuple[Any, ...]]) -> list[float]:
    return [(later - earlier).total_seconds() * 1000 for earlier, later in rows]


def chain_latency(ctx: Any, steps: int) -> list[str]:
    """Part 2: step-to-step latency of a chain, and the plain wake, on one runworker."""
    import ours
    from django.db import connections

    from workqueue.api import NewItem, Workflow, enqueue, enqueue_workflow

    workers = ours.RunWorkers("default", 1)
    try:
        wf = Workflow()
        wf.chain(*(NewItem(ours.KIND, {"seq": i}) for i in range(steps)))
        declared = enqueue_workflow(ctx, wf)
        _wait_done(list(declared.ids))
        plain_ids = []
        for i in range(steps):
            item, _ = enqueue(ctx, ours.KIND, {"seq": i})
            plain_ids.append(item.id)
            _wait_done([item.id])
    finally:
        workers.stop()
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT p.updated_at, c.claimed_at FROM workqueue_workitem p"
            " JOIN workqueue_dependency d ON d.parent_id = p.id"
            " JOIN workqueue_workitem c ON c.id = d.child_id WHERE p.id = ANY(%s)",
            [list(declared.ids)],
        )
        chain = _ms(cursor.fetchall())
        cursor.execute(
            "SELECT created_at, claimed_at FROM workqueue_workitem WHERE id = ANY(%s)",
            [plain_ids],
        )
        plain = _ms(cursor.fetchall())
    _clear()
    return [
        f"{name:<34} p50 {_pct(ms, 0.5):6.2f} ms  p99 {_pct(ms, 0.99):6.2f} ms  ({len(ms)} samples)"
        for name, ms in (("chain, step to step", chain), ("plain wake, enqueue to claim", plain))
    ]


def callback_delay(ctx: Any, sizes: list[int]) -> list[str]:
    """Part 3: a group callback's claim after its last member's completion, two runworkers."""
    import ours
    from django.db import connections

    lines = []
    for size in sizes:
        workers = ours.RunWorkers("default", 2)
        try:
            started = time.perf_counter()
            declared, group, _ = _group(ctx, size, "default", "default")
            callbacks = [declared[group.on_success], declared[group.on_complete]]
            _wait_done(callbacks[:1])
            _wait_done(callbacks[1:])
            drained = time.perf_counter() - started
        finally:
            workers.stop()
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT (SELECT min(claimed_at) FROM workqueue_workitem WHERE id = ANY(%s))"
                " - (SELECT max(updated_at) FROM workqueue_workitem WHERE id = ANY(%s))",
                [callbacks, [declared[m] for m in group.members]],
            )
            delay = cursor.fetchone()[0].total_seconds() * 1000
        lines.append(
            f"group of {size:>7,}: callback claimed {delay:6.2f} ms after the last member"
            f" (group drained in {drained:.1f} s, {size / drained:,.0f} members/s)"
        )
        _clear()
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--groups", default="1000,100000")
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--callback-groups", default="1000,100000")
    parser.add_argument("--parts", default="cost,chain,callback", help="which parts to run")
    parser.add_argument("--database-url", help="an owner URL (default: the embedded server)")
    args = parser.parse_args()
    import ours

    dsn = ours.fresh_database(args.database_url, DBNAME)

    ours.setup_django(dsn)
    ctx = ours.prepare(dsn)
    parts = set(args.parts.split(","))
    lines = []
    if "cost" in parts:
        sizes = [int(s) for s in args.groups.split(",") if s]
        lines += completion_cost(ctx, args.rounds, args.batch, sizes)
    if "chain" in parts:
        lines += chain_latency(ctx, args.chain)
    if "callback" in parts:
        lines += callback_delay(ctx, [int(s) for s in args.callback_groups.split(",") if s])
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
