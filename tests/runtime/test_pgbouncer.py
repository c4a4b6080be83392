"""Behind PgBouncer in transaction pooling (issue 18, point 3): every face of the product works
through a real PgBouncer from Debian's package, with its default configuration but
``pool_mode = transaction`` and two server connections per login, so one client's consecutive
transactions land on different server connections.

The aliases are configured as ``DATABASE_POOLER=transaction`` configures them
(``project.database.database_settings``), pointed at the pooler; the owner stays direct.
Before the fix PgBouncer refused every connection (``unsupported startup parameter:
options``, the ``-c jit=off`` sent at connect), and without that option a prepared statement
met another server connection (``prepared statement "_pg3_0" does not exist``).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import environ
import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client

from outbox.emit import emit
from outbox.relay import relay_all
from project.database import database_settings, url_for
from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tenancy.models import Org
from tenancy.scope import tenant_scope
from tests import pgbouncer
from tests.factories import MembershipFactory, OrgFactory, UserFactory
from tests.helpers import queue_settings
from tests.runtime.support import PYTHON, ROOT, count, crash_tracebacks, subprocess_env
from workers.sweep.sweeper import SweepLock
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.models import Status, WorkItem
from workqueue.settle import complete, fail, release
from wqcore.store import aclose_async_store

User = get_user_model()

pytestmark = pytest.mark.usefixtures("committed")

POOLED = ("default", "system")
# The keys of a DATABASES entry that say how to reach the database, with Django's defaults.
_REACH = {
    "NAME": "",
    "USER": "",
    "PASSWORD": "",
    "HOST": "",
    "PORT": "",
    "OPTIONS": {},
    "DISABLE_SERVER_SIDE_CURSORS": False,
}


@pytest.fixture(scope="module")
def bouncer(django_db_setup: None) -> Iterator[Any]:
    if pgbouncer.PGBOUNCER is None:
        pytest.skip(pgbouncer.NOT_INSTALLED)
    server = connections["admin"].settings_dict
    logins = {
        connections[alias].settings_dict["USER"]: connections[alias].settings_dict["PASSWORD"]
        for alias in POOLED
    }
    started = pgbouncer.start(server["HOST"], server["PORT"], logins)
    yield started
    started.stop()


def _direct_url(alias: str) -> str:
    """The login of ``alias`` on the test database, reached directly (as the owner is)."""
    login = connections[alias].settings_dict
    return url_for(
        {**connections["admin"].settings_dict, "USER": login["USER"], "PASSWORD": login["PASSWORD"]}
    )


def _pooled_entries(bouncer: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """The three aliases as the settings make them with the pooler in front of the everyday
    and system logins (``DATABASE_POOLER=transaction``), the owner direct."""
    name = connections["admin"].settings_dict["NAME"]
    for variable, alias in (("DATABASE_URL", "default"), ("SYSTEM_DATABASE_URL", "system")):
        entry = connections[alias].settings_dict
        monkeypatch.setenv(variable, bouncer.url(entry["USER"], name, entry["PASSWORD"]))
    monkeypatch.setenv("ADMIN_DATABASE_URL", url_for(connections["admin"].settings_dict))
    monkeypatch.setenv("DATABASE_DIRECT_URL", _direct_url("default"))
    monkeypatch.setenv("DATABASE_POOLER", "transaction")
    return database_settings(environ.Env(), ROOT)


@pytest.fixture
def pooled(bouncer: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The everyday and system aliases through the pooler, for every thread."""
    entries = _pooled_entries(bouncer, monkeypatch)
    saved = {alias: dict(connections[alias].settings_dict) for alias in POOLED}
    connections.close_all()
    # Every thread's connection wrapper shares the alias's settings dict: change it in place.
    for alias in POOLED:
        connections[alias].settings_dict.update(
            {key: entries[alias].get(key, default) for key, default in _REACH.items()}
        )
    try:
        with queue_settings(POOLER="transaction", LISTEN_DATABASE_ALIAS=None):
            yield bouncer
    finally:
        connections.close_all()
        for alias in POOLED:
            connections[alias].settings_dict.clear()
            connections[alias].settings_dict.update(saved[alias])


def _member(org: Org | None = None, role: Role = Role.MEMBER, staff: bool = False) -> OpContext:
    member = MembershipFactory(org=org or OrgFactory(), user=UserFactory(is_staff=staff), role=role)
    return OpContext(member.org_id, member.user_id, role, new_request_context(AppType.WEB))


def _signed_in(ctx: OpContext) -> Client:
    client = Client()
    client.force_login(User.objects.using("admin").get(pk=ctx.user_id))
    return client


def _server_pid(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _recent(moment: datetime) -> bool:
    return moment.utcoffset() == timedelta(0) and abs(datetime.now(UTC) - moment) < timedelta(
        minutes=5
    )


# -- the steps, each run many times over on several threads ------------------------------------


def _sync_round(
    n: int, mine: OpContext, theirs: OpContext, rctx: Any, worker: str, seen: set[int]
) -> int:
    """One round on the sync face (Django's connections); returns the steps it ran."""
    item, _ = api.enqueue(mine, "NOOP", {"n": n}, idempotency_key=f"{worker}-{n}")
    assert _recent(item.created_at), item.created_at
    again, outcome = api.enqueue(mine, "NOOP", {"n": n}, idempotency_key=f"{worker}-{n}")
    assert (again.id, outcome) == (item.id, api.Outcome.KEY_EXISTS)
    api.enqueue_many(mine, [api.NewItem("NOOP", {"n": n * 10 + i}) for i in range(5)])
    with tenant_scope(mine.org_id):
        visible = list(WorkItem.objects.filter(kind="NOOP").values_list("org_id", flat=True))
        assert set(visible) == {mine.org_id}, "a tenant saw another's rows"
        assert not WorkItem.objects.filter(org_id=theirs.org_id).exists()
    # QuerySet.iterator() outside a transaction: a cursor WITH HOLD unless disabled.
    assert any(row.id == item.id for row in WorkItem.objects.using("system").iterator(50))
    emit(mine, "work.NOOP", {"n": n})
    relay_all(rctx, batch=10, max_batches=2)
    claimed = claim(rctx, "default", ["NOOP"], worker, 30, 3)
    for index, (ctx, got) in enumerate(claimed):
        if index == 0:
            complete(ctx, got)
        elif index == 1:
            fail(ctx, got, "through the pooler", permanent=n % 2 == 0)
        else:
            release(ctx, got, "handed back")
    seen.add(_server_pid("default"))
    seen.add(_server_pid("system"))
    return 9 + len(claimed)


async def _async_rounds(rounds: int, mine: OpContext, rctx: Any, worker: str) -> int:
    """Rounds on the async face (the store's own pools); returns the steps they ran."""
    steps = 0
    try:
        for n in range(rounds):
            item, _ = await api.aenqueue(mine, "NOOP", {"n": n}, idempotency_key=f"{worker}-{n}")
            assert _recent(item.created_at), item.created_at
            many = [api.NewItem("NOOP", {"n": n * 10 + i}) for i in range(4)]
            await api.aenqueue_many(mine, many)
            claimed = await runtime.aclaim(rctx, "default", ["NOOP"], worker, 30, 3)
            for index, (ctx, got) in enumerate(claimed):
                assert _recent(got.lease_expires_at - timedelta(seconds=30))
                if index == 0:
                    await complete.aio(ctx, got)
                elif index == 1:
                    await runtime.afail(ctx, got, "through the pooler")
                else:
                    await runtime.arelease(ctx, got, "handed back")
            steps += 3 + len(claimed)
    finally:
        await aclose_async_store()
    return steps


def _api_round(n: int, mine: OpContext, client: Client, theirs: Client) -> int:
    response = client.post(
        "/api/work/", json.dumps({"kind": "NOOP", "payload": {"n": n}}), "application/json"
    )
    assert response.status_code == 201, response.content
    item_id = response.json()["item"]["id"]
    got = client.get(f"/api/work/{item_id}")
    assert got.status_code == 200 and got.json()["item"]["id"] == item_id, got.content
    assert theirs.get(f"/api/work/{item_id}").status_code == 404, "a tenant read another's item"
    return 3


ITEMS = "/admin/workqueue/workitem/"
DEAD = "/admin/workqueue/deadletter/"


def _shown(response: Any) -> set[str]:
    """The ids of the items an admin list shows (its rows' checkboxes)."""
    assert response.status_code == 200, response.status_code
    return set(re.findall(r'name="_selected_action" value="([0-9a-f-]{36})"', response.text))


def _admin_round(
    operator: Client, staff: Client, org_id: uuid.UUID, own: uuid.UUID, theirs: uuid.UUID
) -> int:
    """The operator finds any tenant's item; the tenant's staff see their own rows only."""
    for item_id in (own, theirs):
        assert _shown(operator.get(ITEMS, {"q": str(item_id)})) == {str(item_id)}
    assert _shown(staff.get(ITEMS, {"q": str(own)})) == {str(own)}
    assert _shown(staff.get(ITEMS, {"q": str(theirs)})) == set(), "staff found another's item"
    for page in (ITEMS, DEAD):
        _shown(operator.get(page))
        shown = _shown(staff.get(page))
        orgs = set(WorkItem.objects.using("admin").filter(id__in=shown).values_list("org_id"))
        assert orgs <= {(org_id,)}, "a tenant's staff saw another's rows"
    return 8


def _threads(jobs: list[Callable[[], int]]) -> tuple[int, list[str]]:
    """Run each job on its own thread (its own connections); the steps run and the errors."""
    steps: list[int] = []
    errors: list[str] = []

    def run(job: Callable[[], int]) -> None:
        try:
            steps.append(job())
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return sum(steps), errors


def test_enqueue_claim_settle_the_api_and_the_admin_through_the_pooler(pooled, worker_rctx):
    org_a = OrgFactory()
    a, b = _member(org_a), _member()
    staff = _signed_in(_member(org_a, Role.ADMIN, staff=True))
    operator = Client()
    operator.force_login(UserFactory(is_staff=True, is_superuser=True))
    a_item, _ = api.enqueue(a, "NOOP", {"n": -1})
    b_item, _ = api.enqueue(b, "NOOP", {"n": -1})
    rounds = 25
    seen: dict[str, set[int]] = {}

    def sync_job(mine: OpContext, theirs: OpContext, name: str) -> Callable[[], int]:
        def job() -> int:
            pids = seen.setdefault(name, set())
            return sum(_sync_round(n, mine, theirs, worker_rctx, name, pids) for n in range(rounds))

        return job

    def async_job(mine: OpContext, name: str) -> Callable[[], int]:
        return lambda: asyncio.run(_async_rounds(rounds, mine, worker_rctx, name))

    def api_job() -> int:
        clients = (_signed_in(a), _signed_in(b))
        return sum(
            _api_round(n, (a, b)[n % 2], clients[n % 2], clients[1 - n % 2]) for n in range(rounds)
        )

    def admin_job() -> int:
        return sum(
            _admin_round(operator, staff, a.org_id, a_item.id, b_item.id)
            for _ in range(rounds // 5)
        )

    steps, errors = _threads(
        [
            sync_job(a, b, "sync-a"),
            sync_job(b, a, "sync-b"),
            async_job(a, "async-a"),
            async_job(b, "async-b"),
            api_job,
            admin_job,
        ]
    )
    assert errors == [], f"{len(errors)} failed of {steps} steps:\n" + "\n".join(errors[:3])
    assert steps > 600
    # Each sync thread's one client connection met more than one server connection: a
    # statement prepared on one would have been missing on the next.
    assert any(len(pids) > 1 for pids in seen.values()), seen
    # Nothing crossed tenants: every row is its enqueuer's.
    for ctx in (a, b):
        with tenant_scope(ctx.org_id):
            assert set(WorkItem.objects.values_list("org_id", flat=True)) == {ctx.org_id}


def test_every_server_connection_has_the_logins_session_settings(pooled) -> None:
    """jit = off and UTC come from the logins (ALTER ROLE ... SET), not the startup packet: they
    hold on every server connection a transaction may land on."""
    found: set[tuple[str, str, str]] = set()
    pids: set[int] = set()

    def read(alias: str) -> int:
        for _ in range(20):
            with connections[alias].cursor() as cursor:
                cursor.execute(
                    "SELECT current_user, current_setting('jit'), current_setting('TimeZone'),"
                    " pg_backend_pid()"
                )
                user, jit, zone, pid = cursor.fetchone()
            found.add((user, jit, zone))
            pids.add(pid)
        return 20

    _, errors = _threads([lambda alias=alias: read(alias) for alias in POOLED * 3])
    assert errors == []
    assert {(jit, zone) for _, jit, zone in found} == {("off", "UTC")}, found
    assert len(pids) > 2, pids


def test_the_sweeps_lock_bounds_its_idle_transaction_for_that_transaction_only(pooled) -> None:
    """The sweep's lock sits idle in its transaction for a pass; the bound on that is set by
    the statement that takes the lock, so it is this transaction's (a session setting would
    stay on whichever server connection it reached, for its next client)."""
    lock = SweepLock()
    try:
        assert lock.acquire(timeout_s=10)
        conn = lock._conn
        assert conn is not None
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "40s"
        lock.release()
        after = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0]
        conn.rollback()
        assert after == "0"
    finally:
        lock.close()


# -- a real worker through the pooler -----------------------------------------------------------


def _runworker(pooled: Any, monkeypatch: pytest.MonkeyPatch, **env: str) -> subprocess.Popen[str]:
    """``manage.py runworker NOOP`` with both logins through the pooler, the owner direct, and
    ``DATABASE_DIRECT_URL`` only if ``env`` names it."""
    entries = _pooled_entries(pooled, monkeypatch)
    monkeypatch.delenv("DATABASE_DIRECT_URL")
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "NOOP", "--metrics-port", "0"],
        cwd=ROOT,
        env=subprocess_env(
            DATABASE_URL=url_for(entries["default"]),
            SYSTEM_DATABASE_URL=url_for(entries["system"]),
            DATABASE_POOLER="transaction",
            SWEEP_INTERVAL_S="0.5",
            **env,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(predicate: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _stop(proc: subprocess.Popen[str]) -> str:
    try:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return output


def _done(ids: list[uuid.UUID]) -> Callable[[], bool]:
    return lambda: count(status=Status.DONE, id__in=ids) == len(ids)


def test_a_worker_drains_through_the_pooler_and_wakes_by_listen_on_the_direct_url(
    pooled, monkeypatch
) -> None:
    """The worker's statements go through the pooler; its LISTEN goes to PostgreSQL itself
    (DATABASE_DIRECT_URL): with the poll an hour apart, only a notice can wake it."""
    tenants = (_member(), _member())
    first = [api.enqueue(tenants[i % 2], "NOOP", {"n": i})[0].id for i in range(30)]
    proc = _runworker(
        pooled,
        monkeypatch,
        DATABASE_DIRECT_URL=_direct_url("default"),
        WORKER_POLL_INTERVAL_MS="3600000",
    )
    try:
        _wait(_done(first))
        time.sleep(0.5)  # idle, waiting on its notices
        then = [api.enqueue(tenants[i % 2], "NOOP", {"n": i})[0].id for i in range(10)]
        _wait(_done(then), timeout_s=15)
    finally:
        output = _stop(proc)
    assert proc.returncode == 0, output
    assert "prepared statement" not in output and not crash_tracebacks(output), output
    assert "sweep_step_failed" not in output, output
    assert "listen_off" not in output, output


def test_a_worker_behind_the_pooler_with_no_direct_url_finds_work_by_its_poll(
    pooled, monkeypatch
) -> None:
    tenant = _member()
    proc = _runworker(pooled, monkeypatch, WORKER_POLL_INTERVAL_MS="200")
    try:
        time.sleep(1)
        ids = [api.enqueue(tenant, "NOOP", {"n": i})[0].id for i in range(10)]
        _wait(_done(ids), timeout_s=15)
    finally:
        output = _stop(proc)
    assert proc.returncode == 0, output
    assert 'listen_off reason="pooler"' in output, output
    assert not crash_tracebacks(output), output


def test_pgbouncer_refuses_a_startup_option(bouncer) -> None:
    """What the product sent before: the pooler's default configuration refuses it, so the
    product sends none (the settings' OPTIONS carry no "options")."""
    import psycopg

    url = bouncer.url(connections["default"].settings_dict["USER"], "postgres")
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter: options"):
        psycopg.connect(url, options="-c jit=off")
    for alias in ("default", "system", "admin"):
        assert "options" not in connections[alias].settings_dict["OPTIONS"], alias
