"""Settling on Citus under the item's tenant (the tenant's login, row-level security on): a
handler that returns, one that raises with attempts left, and one that fails for good, each
settled in one transaction Citus sends only to the node holding the tenant, its attempt (and
the retry's ready row, the dead letter's audit entry) recorded there; a stale token settles and
records nothing; the worker's async face settles the same way."""

from __future__ import annotations

import asyncio
import copy
import re
import uuid

import psycopg
import pytest
from django.db import connections

from tenancy.contexts import AppType, new_request_context
from tests.citus.conftest import Tenant, new_tenant, remote_commands
from workqueue import api
from workqueue.claim import claim
from workqueue.exceptions import Conflict
from workqueue.models import WorkItem
from workqueue.settle import afail, complete, fail


def _lane() -> str:
    """A lane of the test's own: the claim reads every tenant's due items of its lane."""
    return f"citus-settle-{uuid.uuid4().hex[:8]}"


def _claimed(t: Tenant, n: int, lane: str) -> list[WorkItem]:
    for _ in range(n):
        api.enqueue(t.ctx, "NOOP", {}, lane=lane)
    got = claim(new_request_context(AppType.WORKER), lane, ["NOOP"], "host:1:w", 30.0, n)
    assert len(got) == n
    return [item for _, item in got]


def _rows(coordinator: psycopg.Connection, item_id: uuid.UUID) -> tuple[object, ...]:
    """The item's status and attempts, its attempts' outcomes and workers, its ready rows and
    its dead letter's audit entries."""
    found = coordinator.execute(
        "SELECT w.status, w.attempts, "
        " (SELECT array_agg(a.outcome || '@' || a.worker ORDER BY a.attempt)"
        "    FROM workqueue_attempt a WHERE a.org_id = w.org_id AND a.item_id = w.id),"
        " (SELECT count(*) FROM workqueue_ready r WHERE r.org_id = w.org_id AND r.id = w.id),"
        " (SELECT count(*) FROM workqueue_audit_auditentry e"
        "   WHERE e.org_id = w.org_id AND e.subject_id = w.id::text"
        "     AND e.action = 'work.dead_lettered')"
        " FROM workqueue_workitem w WHERE w.id = %s",
        [item_id],
    ).fetchone()
    assert found is not None
    return tuple(found)


class Remote:
    """The commands Citus sends to the workers from the tenant login's connection."""

    def __init__(self) -> None:
        self.seen = remote_commands("citus_app")
        with connections["citus_app"].cursor() as cursor:
            cursor.execute("SET citus.log_remote_commands = on")
            cursor.execute("SET client_min_messages = log")

    def ports(self) -> set[int]:
        return {int(p) for line in self.seen for p in re.findall(r":(\d+) connectionId", line)}

    def close(self) -> None:
        with connections["citus_app"].cursor() as cursor:
            cursor.execute("RESET client_min_messages")
            cursor.execute("RESET citus.log_remote_commands")


def test_each_settle_runs_on_the_tenants_login_routed_to_its_node(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    t, lane = new_tenant(coordinator), _lane()
    done, retried, dead = _claimed(t, 3, lane)
    remote = Remote()
    try:
        complete(t.ctx, done, {"ok": 1})
        fail(t.ctx, retried, "boom", traceback="Traceback: boom", delay_s=0)
        fail(t.ctx, dead, "bad input", permanent=True)
    finally:
        remote.close()
    assert _rows(coordinator, done.id) == ("done", 1, ["done@host:1:w"], 0, 0)
    assert _rows(coordinator, retried.id) == ("pending", 1, ["retried@host:1:w"], 1, 0)
    assert _rows(coordinator, dead.id) == ("failed", 1, ["dead_lettered@host:1:w"], 0, 1)
    assert remote.ports() == {t.port}, remote.seen
    assert not any("COPY" in line for line in remote.seen), remote.seen
    stored = coordinator.execute(
        "SELECT w.result, a.traceback FROM workqueue_workitem w JOIN workqueue_attempt a"
        " ON a.org_id = w.org_id AND a.item_id = w.id WHERE w.id = ANY(%s) ORDER BY w.status",
        [[done.id, retried.id]],
    ).fetchall()
    assert stored == [({"ok": 1}, ""), (None, "Traceback: boom")]
    # The retried item is claimed again, and its second failure, attempts spent, is a dead letter.
    [(_, again)] = claim(new_request_context(AppType.WORKER), lane, ["NOOP"], "host:2:w", 30, 1)
    assert (again.id, again.attempts) == (retried.id, 2)
    fail(t.ctx, again, "boom again", permanent=True)
    assert _rows(coordinator, retried.id) == (
        "failed",
        2,
        ["retried@host:1:w", "dead_lettered@host:2:w"],
        0,
        1,
    )


def test_a_stale_token_settles_and_records_nothing(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    t = new_tenant(coordinator)
    [item] = _claimed(t, 1, _lane())
    stale = copy.copy(item)
    stale.claim_token = uuid.uuid4()
    for settle in (
        lambda: complete(t.ctx, stale, None),
        lambda: fail(t.ctx, stale, "late"),
        lambda: fail(t.ctx, stale, "late", permanent=True),
    ):
        with pytest.raises(Conflict):
            settle()
    assert _rows(coordinator, item.id) == ("claimed", 1, None, 0, 0)


def test_the_workers_async_face_settles_on_the_tenants_node(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    from wqcore.async_face import aclose_async_store

    t = new_tenant(coordinator)
    retried, dead = _claimed(t, 2, _lane())

    async def run() -> None:
        try:
            await afail(t.ctx, retried, "boom")
            await afail(t.ctx, dead, "bad", permanent=True)
        finally:
            await aclose_async_store()

    asyncio.run(run())
    assert _rows(coordinator, retried.id) == ("pending", 1, ["retried@host:1:w"], 1, 0)
    assert _rows(coordinator, dead.id) == ("failed", 1, ["dead_lettered@host:1:w"], 0, 1)


def test_the_sweeps_hand_back_runs_on_the_tenants_node(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    """An expired lease's hand-back and the rescue's (``requeue_stale``, ``requeue_held``, under
    the tenant's service context, as the sweep calls them): requeued with a ready row, a dead
    letter once attempts are spent and one cancelled as asked, each with its audit entry, every
    attempt recorded with its holder and outcome; one transaction on the tenant's node."""
    from datetime import timedelta

    from django.utils import timezone

    from tenancy.contexts import service_context
    from workqueue.maintenance import requeue_held, requeue_stale

    t, lane = new_tenant(coordinator), _lane()
    requeued, spent, cancelled, held = _claimed(t, 4, lane)
    coordinator.execute(
        "UPDATE workqueue_workitem SET max_attempts = 1 WHERE org_id = %s AND id = %s",
        [t.org_id, spent.id],
    )
    coordinator.execute(
        "UPDATE workqueue_workitem SET cancel_requested_at = now() WHERE org_id = %s AND id = %s",
        [t.org_id, cancelled.id],
    )
    coordinator.execute(
        "UPDATE workqueue_workitem SET claimed_by = 'gone:9:w', lease_expires_at = now() + '1 h'"
        " WHERE org_id = %s AND id = %s",
        [t.org_id, held.id],
    )
    ctx = service_context(new_request_context(AppType.SWEEP), t.org_id)
    later = timezone.now() + timedelta(minutes=5)
    remote = Remote()
    try:
        stale = requeue_stale(ctx, before=later)
        rescued = requeue_held(ctx, ["gone:9:w"], later)
    finally:
        remote.close()
    assert (stale.requeued, stale.dead_lettered, stale.cancelled) == (1, 1, 1)
    assert (rescued.requeued, rescued.dead_lettered, rescued.cancelled) == (1, 0, 0)
    assert _rows(coordinator, requeued.id) == ("pending", 1, ["lease_expired@host:1:w"], 1, 0)
    assert _rows(coordinator, spent.id) == ("failed", 1, ["lease_expired@host:1:w"], 0, 1)
    assert _rows(coordinator, cancelled.id)[:4] == ("cancelled", 1, ["lease_expired@host:1:w"], 0)
    assert _rows(coordinator, held.id) == ("pending", 1, ["holder_gone@gone:9:w"], 1, 0)
    entries = coordinator.execute(
        "SELECT subject_id, action FROM workqueue_audit_auditentry WHERE org_id = %s"
        " AND action IN ('work.dead_lettered', 'work.cancelled')",
        [t.org_id],
    ).fetchall()
    assert sorted(entries) == sorted(
        [(str(spent.id), "work.dead_lettered"), (str(cancelled.id), "work.cancelled")]
    )
    assert remote.ports() == {t.port}, remote.seen
    assert not any("COPY" in line for line in remote.seen), remote.seen


def test_the_sweeps_steps_hand_back_a_dead_workers_items_on_citus(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    """The sweep's own steps, as a pass runs them: the rescue finds a worker whose liveness lock
    no session holds (its row on the coordinator, its items on a node) and hands its items back;
    the lease's step hands back an item whose lease passed, in another tenant on another node."""
    from workers.sweep import requeue_stale, rescue
    from workers.sweep.config import SweepSettings

    a = new_tenant(coordinator)
    b = new_tenant(coordinator, avoid=a.port)
    lane = _lane()
    [dead_worker] = _claimed(a, 1, lane)
    [expired] = _claimed(b, 1, lane)
    gone = f"gone:{uuid.uuid4().hex[:6]}:w"
    coordinator.execute(
        "INSERT INTO workqueue_workers_worker (id, kind, lane, host, pid, state, lock_key,"
        " lock_lost_at)"
        " VALUES (%s, 'NOOP', %s, 'gone', 9, 'running', %s, now() - interval '1 min')",
        [gone, lane, int(uuid.uuid4().int >> 65)],
    )
    coordinator.execute(
        "UPDATE workqueue_workitem SET claimed_by = %s, claimed_at = now() - interval '1 min',"
        " lease_expires_at = now() + interval '1 h' WHERE org_id = %s AND id = %s",
        [gone, a.org_id, dead_worker.id],
    )
    coordinator.execute(
        "UPDATE workqueue_workitem SET lease_expires_at = now() - interval '1 s'"
        " WHERE org_id = %s AND id = %s",
        [b.org_id, expired.id],
    )
    rctx = new_request_context(AppType.SWEEP)
    settings = SweepSettings(batch=10, max_batches=2, rescue_grace_s=1.0)
    rescued = rescue.run_once(rctx, settings)
    stale = requeue_stale.run_once(rctx, settings)
    # (Other tests' items may be handed back beside these: the steps read every tenant.)
    assert rescued.holders >= 1 and rescued.requeued >= 1 and stale.requeued >= 1
    assert _rows(coordinator, dead_worker.id)[:3] == ("pending", 1, [f"holder_gone@{gone}"])
    assert _rows(coordinator, expired.id)[:3] == ("pending", 1, ["lease_expired@host:1:w"])


def test_the_purge_deletes_each_tenants_old_items_on_its_node(
    product: dict[str, str], coordinator: psycopg.Connection
) -> None:
    """Retention on Citus (``purge_items``, the sweep's step): the tenants with old ended items
    read across nodes, then each one's deleted with their attempts on its node; what is newer,
    or not ended, stays."""
    from datetime import timedelta

    from django.utils import timezone

    from workqueue.maintenance import purge_items

    a = new_tenant(coordinator)
    b = new_tenant(coordinator, avoid=a.port)
    lane = _lane()
    old_a, kept_a = _claimed(a, 2, lane)
    [old_b] = _claimed(b, 1, lane)
    for t, item in ((a, old_a), (a, kept_a), (b, old_b)):
        complete(t.ctx, item, None)
    pending = api.enqueue(a.ctx, "NOOP", {}, lane=lane)[0]
    coordinator.execute(
        "UPDATE workqueue_workitem SET updated_at = now() - interval '2 days'"
        " WHERE (org_id, id) IN ((%s, %s), (%s, %s), (%s, %s))",
        [a.org_id, old_a.id, b.org_id, old_b.id, a.org_id, pending.id],
    )
    purged = purge_items(
        new_request_context(AppType.SWEEP), timezone.now() - timedelta(days=1), batch=10
    )
    assert purged >= 2
    left = coordinator.execute(
        "SELECT id FROM workqueue_workitem WHERE id = ANY(%s)",
        [[old_a.id, kept_a.id, old_b.id, pending.id]],
    ).fetchall()
    assert {row[0] for row in left} == {kept_a.id, pending.id}
    attempts = coordinator.execute(
        "SELECT item_id FROM workqueue_attempt WHERE item_id = ANY(%s)",
        [[old_a.id, kept_a.id, old_b.id]],
    ).fetchall()
    assert {row[0] for row in attempts} == {kept_a.id}
