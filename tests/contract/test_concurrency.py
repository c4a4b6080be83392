"""Claims raced from many connections at once: every item goes to exactly one claimer."""

from __future__ import annotations

import threading
from collections import Counter

from django.db import connections

from tenancy.contexts import AppType, new_request_context
from workqueue.api import NewItem, enqueue, enqueue_many
from workqueue.claim import claim


def _race(claimers: int, work) -> list:
    """Run ``work(i)`` in ``claimers`` threads released together; each has its own connection."""
    start = threading.Barrier(claimers)
    results: list = [None] * claimers
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait(10)
            results[i] = work(i)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


def test_two_claimers_at_once_on_one_item_exactly_one_wins(ctx) -> None:
    for _ in range(20):  # many rounds, so the race is really run
        item, _ = enqueue(ctx, "NOOP", {})
        rctx = new_request_context(AppType.WORKER)
        got = _race(2, lambda i, rctx=rctx: claim(rctx, "default", None, f"w{i}", 30, 1))
        winners = [g for g in got if g]
        assert len(winners) == 1 and winners[0][0][1].id == item.id


def test_eight_claimers_over_two_thousand_items_claim_each_once(ctx) -> None:
    enqueue_many(ctx, [NewItem("NOOP", {"n": i}) for i in range(2000)])
    rctx = new_request_context(AppType.WORKER)

    def drain(i: int) -> list:
        mine = []
        while batch := claim(rctx, "default", None, f"w{i}", 30, 25):
            mine += [item.id for _, item in batch]
        return mine

    per_claimer = _race(8, drain)
    claimed = Counter(item_id for ids in per_claimer for item_id in ids)
    assert len(claimed) == 2000
    assert set(claimed.values()) == {1}
    assert sum(1 for ids in per_claimer if ids) >= 2  # the work really was shared
