"""The claim on Citus (``WORKQUEUE["CITUS"]``): tenants chosen on the coordinator, each one's
items claimed by a statement routed to the worker that holds it, with the fence, the attempt
and the lease the single server's claim writes; two claims of one tenant never share an item."""

from __future__ import annotations

import re
import threading
import uuid

import psycopg
from django.db import connections, transaction

from tenancy.contexts import AppType, new_request_context
from tests.citus.conftest import Tenant, new_tenant, remote_commands
from workqueue import api
from workqueue.claim import Claimed, claim
from workqueue.claim_citus import CLAIM_TENANT_CITUS, ClaimTenantParams
from wqcore.store import System, run

# A lane of this run's own: the cluster outlives a run, and the claim reads every tenant's
# due items of its lane (another run's handed back by a sweep, say).
LANE = f"citus-claim-{uuid.uuid4().hex[:8]}"


def _enqueue(t: Tenant, n: int) -> set[uuid.UUID]:
    return {api.enqueue(t.ctx, "NOOP", {}, lane=LANE)[0].id for _ in range(n)}


def _claimnew_tenant(t: Tenant, limit: int) -> set[uuid.UUID]:
    params = ClaimTenantParams(t.org_id, LANE, ["NOOP"], "w", 30.0, limit, uuid.uuid4().hex, None)
    rows = run(_one(System(CLAIM_TENANT_CITUS, params)))
    at = rows.names.index("id")
    return {row[at] for row in rows.rows}


def _one(step: System):  # type: ignore[no-untyped-def]
    return (yield step)


def test_the_claim_takes_each_tenants_items_on_its_node(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    a = new_tenant(coordinator)
    b = new_tenant(coordinator, avoid=a.port)
    wanted = _enqueue(a, 3) | _enqueue(b, 2)
    rctx = new_request_context(AppType.WORKER)
    seen = remote_commands("citus_system")
    with connections["citus_system"].cursor() as cursor:
        cursor.execute("SET citus.log_remote_commands = on")
        cursor.execute("SET client_min_messages = log")
    try:
        got: Claimed = claim(rctx, LANE, ["NOOP"], "w1", 30.0, 10)
    finally:
        with connections["citus_system"].cursor() as cursor:
            cursor.execute("RESET client_min_messages")
            cursor.execute("RESET citus.log_remote_commands")
    # Each tenant's claim went whole to the worker holding it, and only there.
    claims = [line for line in seen if "issuing WITH claimed AS" in line]
    assert len(claims) == 2, seen
    for t in (a, b):
        ports = {
            int(port)
            for line in claims
            if str(t.org_id) in line
            for port in re.findall(r":(\d+) connectionId", line)
        }
        assert ports == {t.port}, claims
    assert {item.id for _, item in got} == wanted
    for ctx, item in got:
        assert ctx.org_id == item.org_id
        assert (item.status, item.claimed_by, item.attempts) == ("claimed", "w1", 1)
        assert item.claim_token is not None and item.lease_expires_at is not None
    assert len({item.claim_token for _, item in got}) == len(wanted)
    assert claim(rctx, LANE, ["NOOP"], "w1", 30.0, 10) == []
    left = coordinator.execute(
        "SELECT count(*) FROM workqueue_ready WHERE lane = %s", [LANE]
    ).fetchone()
    assert left == (0,)
    # The fence as stored: each item holds the token, lease and attempt it was handed with.
    stored = dict(
        (row[0], row[1:])
        for row in coordinator.execute(
            "SELECT id, claim_token, attempts, lease_expires_at > now() FROM workqueue_workitem"
            " WHERE id = ANY(%s)",
            [list(wanted)],
        ).fetchall()
    )
    assert stored == {item.id: (item.claim_token, 1, True) for _, item in got}


def test_two_claims_of_one_tenant_get_disjoint_items(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    a = new_tenant(coordinator)
    wanted = _enqueue(a, 6)
    second: list[set[uuid.UUID]] = []

    def other() -> None:
        try:
            second.append(_claimnew_tenant(a, 6))
        finally:
            connections.close_all()

    # The first claim's locks are held while the second runs: SKIP LOCKED passes them by.
    with transaction.atomic(using="citus_system"):
        first = _claimnew_tenant(a, 3)
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(30)
    assert len(first) == 3 and len(second[0]) == 3
    assert first.isdisjoint(second[0]) and first | second[0] == wanted


def test_claimed_items_complete_in_one_batch_across_nodes(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    """The worker's settle (``complete_many``, on the system login): every fenced item done,
    its attempt recorded; a stale token completes nothing."""
    from workqueue.fence import Fence
    from workqueue.settle import complete_many

    a = new_tenant(coordinator)
    b = new_tenant(coordinator, avoid=a.port)
    wanted = _enqueue(a, 2) | _enqueue(b, 2)
    got = claim(new_request_context(AppType.WORKER), LANE, ["NOOP"], "w1", 30.0, 10)
    fences = [Fence.of(item) for _, item in got]
    stale = Fence(fences[0].org_id, fences[0].item_id, uuid.uuid4())
    assert complete_many([stale]) == set()
    assert complete_many(fences) == wanted
    rows = coordinator.execute(
        "SELECT w.status, count(a.id) FROM workqueue_workitem w"
        " LEFT JOIN workqueue_attempt a ON a.org_id = w.org_id AND a.item_id = w.id"
        " WHERE w.id = ANY(%s) GROUP BY w.org_id, w.id, w.status",
        [list(wanted)],
    ).fetchall()
    assert rows == [("done", 1)] * 4


def test_a_paused_lane_or_kind_is_not_claimed_on_citus(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    """Pauses are a reference table (a copy on every node): the tenants' read and each routed
    claim leave a paused lane, or a paused kind, alone; resumed, the items are claimed."""
    lane = f"citus-paused-{uuid.uuid4().hex[:8]}"
    a = new_tenant(coordinator)
    wanted = {api.enqueue(a.ctx, "NOOP", {}, lane=lane)[0].id for _ in range(2)}
    rctx = new_request_context(AppType.WORKER)
    for kind in ("", "NOOP"):
        coordinator.execute(
            "INSERT INTO workqueue_pause (lane, kind, paused_by, reason) VALUES (%s, %s, 't', '')",
            [lane, kind],
        )
        assert claim(rctx, lane, ["NOOP"], "w1", 30.0, 10) == []
        # The routed claim alone (a pause made after the tenants were read) holds it too.
        params = ClaimTenantParams(a.org_id, lane, ["NOOP"], "w", 30.0, 10, uuid.uuid4().hex, None)
        assert run(_one(System(CLAIM_TENANT_CITUS, params))).rows == []
        coordinator.execute("DELETE FROM workqueue_pause WHERE lane = %s", [lane])
    got = claim(rctx, lane, ["NOOP"], "w1", 30.0, 10)
    assert {item.id for _, item in got} == wanted


def test_a_tenants_cap_bounds_what_it_runs_in_a_lane_on_citus(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    """A tenant's share caps what it runs in a lane at once (a reference table, read where the
    claim runs): 5 due, a cap of 2, two claimed; one settled, one more; no share, the rest."""
    from workqueue.fence import Fence
    from workqueue.settle import complete_many

    lane = f"citus-capped-{uuid.uuid4().hex[:8]}"
    a = new_tenant(coordinator)
    for _ in range(5):
        api.enqueue(a.ctx, "NOOP", {}, lane=lane)
    coordinator.execute(
        "INSERT INTO workqueue_tenantshare (org_id, weight, max_in_flight) VALUES (%s, 1, 2)",
        [a.org_id],
    )
    rctx = new_request_context(AppType.WORKER)
    first = claim(rctx, lane, ["NOOP"], "w1", 30.0, 10)
    assert len(first) == 2 and claim(rctx, lane, ["NOOP"], "w1", 30.0, 10) == []
    complete_many([Fence.of(first[0][1])])
    assert len(claim(rctx, lane, ["NOOP"], "w1", 30.0, 10)) == 1
    coordinator.execute("DELETE FROM workqueue_tenantshare WHERE org_id = %s", [a.org_id])
    assert len(claim(rctx, lane, ["NOOP"], "w1", 30.0, 10)) == 2
