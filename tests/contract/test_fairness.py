"""The fair claim: a tenant with a backlog does not delay another tenant's work (issue 14)."""

from __future__ import annotations

import re
import threading
from collections import Counter

import pytest
from django.db import connections, transaction

from tests.factories import OrgFactory
from tests.helpers import queue_settings
from workqueue import api, claim
from workqueue.fence import Fence
from workqueue.models import TenantShare
from workqueue.settle import complete_many

pytestmark = pytest.mark.usefixtures("committed")


@pytest.fixture(autouse=True)
def _fresh_caps():  # type: ignore[no-untyped-def]
    claim.forget_caps()
    yield
    claim.forget_caps()


def _backlog(ctx, n: int, **item) -> list:  # type: ignore[no-untyped-def]
    done = []
    for start in range(0, n, 1000):
        done += api.enqueue_many(
            ctx, [api.NewItem("NOOP", {"n": i}, **item) for i in range(start, min(n, start + 1000))]
        )
    return [item_id for item_id, _ in done]


def _tenants(batch) -> list:  # type: ignore[no-untyped-def]
    return [item.org_id for _, item in batch]


def test_a_small_tenant_is_served_in_the_first_batch_behind_a_big_backlog(
    face, ctx, make_ctx, worker_rctx
) -> None:
    small = make_ctx()
    _backlog(ctx, 10_000)  # the big tenant's backlog is older than the small tenant's work
    mine = set(_backlog(small, 10))
    batch = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 100)
    assert len(batch) == 100
    assert mine <= {item.id for _, item in batch}
    # Round-robin, not "the small tenant last": its items come among the first twenty.
    first = [item.org_id for _, item in batch[:20]]
    assert Counter(first)[small.org_id] == 10


def test_priority_wins_across_tenants(face, ctx, make_ctx, worker_rctx) -> None:
    other = make_ctx()
    _backlog(ctx, 50)
    urgent = _backlog(other, 3, priority=5)
    batch = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    assert {item.id for _, item in batch[:3]} == set(urgent)


def test_a_tenant_at_its_cap_gets_no_more_until_one_completes(face, ctx, make_ctx, worker_rctx):  # type: ignore[no-untyped-def]
    other = make_ctx()
    TenantShare.objects.using("admin").create(org_id=ctx.org_id, max_in_flight=2)
    _backlog(ctx, 20)
    _backlog(other, 5)
    first = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    assert Counter(_tenants(first)) == {ctx.org_id: 2, other.org_id: 5}
    assert _tenants(face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)) == []
    held_ctx, held = next((c, i) for c, i in first if i.org_id == ctx.org_id)
    face.complete(held_ctx, held)
    assert _tenants(face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)) == [ctx.org_id]


def test_a_cap_holds_across_claimers_at_once(ctx, worker_rctx) -> None:
    TenantShare.objects.using("admin").create(org_id=ctx.org_id, max_in_flight=3)
    _backlog(ctx, 200)
    got: list[int] = []
    barrier = threading.Barrier(6)

    def claimer(i: int) -> None:
        try:
            barrier.wait()
            for _ in range(5):
                got.append(len(claim.claim(worker_rctx, "default", ["NOOP"], f"w{i}", 30, 10)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(got) == 3
    assert api.WorkItem.objects.using("admin").filter(status="claimed").count() == 3


@queue_settings(MAX_IN_FLIGHT=1)
def test_the_default_cap_applies_to_tenants_without_their_own(face, ctx, make_ctx, worker_rctx):  # type: ignore[no-untyped-def]
    own = make_ctx()
    TenantShare.objects.using("admin").create(org_id=own.org_id, max_in_flight=4)
    _backlog(ctx, 10)
    _backlog(own, 10)
    batch = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 20)
    assert Counter(_tenants(batch)) == {ctx.org_id: 1, own.org_id: 4}


def test_weights_give_the_stated_shares(ctx, make_ctx, worker_rctx) -> None:
    """Within 5 percentage points over 30 batches of 30: weight 2 takes two thirds."""
    light = make_ctx()
    TenantShare.objects.using("admin").create(org_id=ctx.org_id, weight=2)
    _backlog(ctx, 2000)
    _backlog(light, 2000)
    taken: Counter = Counter()
    for _ in range(30):
        batch = claim.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 30)
        taken.update(_tenants(batch))
        complete_many([Fence.of(item) for _, item in batch])
    share = taken[ctx.org_id] / sum(taken.values())
    assert abs(share - 2 / 3) < 0.05, taken


def test_many_tenants_each_get_a_turn(face, worker_rctx, make_ctx) -> None:
    tenants = [make_ctx(OrgFactory()) for _ in range(12)]
    for c in tenants:
        _backlog(c, 20)
    batch = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 24)
    assert Counter(_tenants(batch)) == {c.org_id: 2 for c in tenants}


@queue_settings(FAIR_CLAIM=False)
def test_with_fairness_off_the_oldest_work_goes_first(face, ctx, make_ctx, worker_rctx) -> None:
    small = make_ctx()
    _backlog(ctx, 300)
    _backlog(small, 10)
    batch = face.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 100)
    assert set(_tenants(batch)) == {ctx.org_id}


def test_claimers_racing_for_the_same_offers_still_fill_their_batches(ctx, worker_rctx) -> None:
    """The fair order offers every claimer the same items; what one holds, the others fill
    from the rest of the lane instead of coming back empty."""
    _backlog(ctx, 400)
    sizes: list[int] = []
    barrier = threading.Barrier(4)

    def claimer(i: int) -> None:
        try:
            barrier.wait()
            sizes.append(len(claim.claim(worker_rctx, "default", ["NOOP"], f"w{i}", 30, 50)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sizes == [50, 50, 50, 50]


def _scans(plan: dict) -> list[dict]:  # type: ignore[type-arg]
    """Every node of an EXPLAIN (FORMAT JSON) plan that reads an index."""
    found = [plan] if "Index Name" in plan else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def test_a_tenants_items_are_read_from_its_own_index_when_another_holds_the_backlog(
    ctx, make_ctx
) -> None:
    """After ANALYZE has sampled one tenant holding nearly every item, the per-tenant pick
    still reads a tenant's items from the ring's fair index (workqueue_ready_fair_idx: lane,
    tenant first), never by walking the lane's whole backlog in its claim index to reach the
    small tenant's few (migration 0020 tells the planner tenants are many, slot by slot)."""
    [seed] = _backlog(ctx, 1)
    with connections["admin"].cursor() as cursor:
        # A backlog as large as the one that showed it (cloned: the API would take minutes).
        columns = (
            "org_id, kind, lane, status, payload, priority, available_at, attempts,"
            " max_attempts, last_error, created_by, updated_by, created_at, updated_at"
        )
        cursor.execute(
            f"INSERT INTO workqueue_workitem (id, {columns})"
            f" SELECT (md5(g::text || w.id::text))::uuid, {columns}"
            " FROM workqueue_workitem w, generate_series(1, 400000) g WHERE w.id = %s",
            [seed],
        )
        # Each with its ready row, as the enqueue writes it: the claim reads the ring.
        cursor.execute(
            "INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at)"
            " SELECT workqueue_ready_slot(w.available_at), w.id, w.org_id, w.lane, w.kind,"
            " w.priority, w.available_at FROM workqueue_workitem w"
            " WHERE w.status = 'pending' AND w.id <> %s",
            [seed],
        )
        cursor.execute("ANALYZE workqueue_workitem")  # it has seen one tenant
        cursor.execute("ANALYZE workqueue_ready")
    api.enqueue(make_ctx(), "NOOP", {"n": -1})
    params = claim.ClaimParams("default", ["NOOP"], "w", 30.0, 10, "off", False, None, None, [], [])
    with transaction.atomic(using="admin"), connections["admin"].cursor() as cursor:
        # The plan a worker runs: the generic one its prepared claim settles on.
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE fair_claim AS {claim.CLAIM.native_sql}")
        try:
            values = ", ".join(["%s"] * len(params))
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE fair_claim({values})", list(params))
            plan = cursor.fetchone()[0][0]["Plan"]
        finally:
            cursor.execute("DEALLOCATE fair_claim")
    per_tenant = [
        node
        for node in _scans(plan)
        if re.search(
            r"org_id = o(_\d+)?\.org_id", node.get("Index Cond", "") + node.get("Filter", "")
        )
    ]
    assert per_tenant, _scans(plan)
    for node in per_tenant:
        # Each slot's copy of workqueue_ready_fair_idx (lane, org_id, priority, available_at).
        assert node["Index Name"].startswith("workqueue_ready_"), node
        assert "org_id" in node["Index Name"], node
        assert re.search(r"org_id = o(_\d+)?\.org_id", node["Index Cond"]), node
