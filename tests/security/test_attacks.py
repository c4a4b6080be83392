"""Attacks, one table (issue 13): each row is something tenant A's side tries against tenant B
or against the queue's fences, and each must be refused. After every row, every row of B's is
read as the owner and must be exactly as it was.

Surfaces: ``sql`` (raw SQL as the everyday login, scoped to A, as a forgotten filter or an
injected fragment would run), ``token`` (claim-token fences), ``enqueue`` and ``outbox`` (the
entry points that take a caller's ids, keys and payloads), ``http`` (the web process: the
tenancy middleware's header and session, the admin's login, CSRF, ``/metrics``), ``worker``
(a real ``runworker``'s ``/metrics`` and ``/healthz``), here; ``api`` (the JSON API),
``admin`` (the lists, detail pages and triage), ``demo`` (the demo page) and ``tasks`` (the
``django.tasks`` backend) in ``attacks_<surface>.py``. The rows' machinery (``@attack``,
``Scene``) is ``table.py``; the two tenants are ``world.py``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connections
from django.db.utils import DatabaseError
from django.test import Client, override_settings

from outbox.emit import emit
from outbox.relay import relay_pending
from tenancy.contexts import AppType, new_request_context
from tenancy.scope import tenant_scope
from tests import summary
from tests.helpers import row

# The rows of the other surfaces: each module registers its own (importing it is enough).
from tests.security import (  # noqa: F401
    attacks_admin,
    attacks_api,
    attacks_controls,
    attacks_demo,
    attacks_tasks,
)
from tests.security import world as worlds
from tests.security.kinds import NOTE
from tests.security.table import (
    ATTACKS,
    Attack,
    Endpoint,
    Scene,
    attack,
    client_of,
    no_tenant_data,
)
from tests.security.world import SECRET, World
from workqueue import api, runtime, settle
from workqueue.claim import claim, fail_orphaned
from workqueue.progress import Reported, write_progress
from workqueue.settle import complete, complete_many
from wqcore.store import aclose_async_store

pytestmark = pytest.mark.usefixtures("committed")

SUITE = "attacks"
summary.FORMATS[SUITE] = lambda c: (
    f"attacks: {c['cases']} cases, {c['refused']} refused, {c['cases'] - c['refused']} allowed"
    " ("
    + ", ".join(
        f"{k.split(':', 1)[1]} {n}" for k, n in sorted(c.items()) if k.startswith("surface:")
    )
    + ")"
)


# -- raw SQL as the everyday login, scoped to A -------------------------------------------------


def as_a(world: World, sql: str) -> Any:
    """``sql`` as the everyday login in A's scope: rows, a row count, or the database's error
    (the scope rolls back, as a request's would)."""
    try:
        with tenant_scope(world.a.org_id), connections["default"].cursor() as cursor:
            cursor.execute(sql, world.params())
            return cursor.fetchall() if cursor.description else cursor.rowcount
    except DatabaseError as exc:
        return exc


def sql_attack(name: str, sql: str, *, sees_nothing: bool = False) -> None:
    """A row whose SQL must fail, or (``sees_nothing``) may run but find none of B's rows."""

    def run(scene: Scene) -> None:
        result = as_a(scene.world, sql)
        if isinstance(result, DatabaseError):
            return
        assert sees_nothing, f"allowed: {sql!r} -> {result!r}"
        assert result in (0, [], [(0,)]), f"B's rows reached: {sql!r} -> {result!r}"

    ATTACKS.append(Attack("sql", name, run))


B = "org_id = %(b_org)s"
for table in (
    "workqueue_workitem",
    "workqueue_outbox_outboxrow",
    "workqueue_audit_auditentry",
    "workqueue_tenancy_membership",
):
    sql_attack(f"read B's {table}", f"SELECT count(*) FROM {table} WHERE {B}", sees_nothing=True)
    sql_attack(
        f"read {table} with an injected OR",
        f"SELECT count(*) FROM {table} WHERE {B} OR true AND {B}",
        sees_nothing=True,
    )
sql_attack(
    "read B's org",
    "SELECT count(*) FROM workqueue_tenancy_org WHERE id = %(b_org)s",
    sees_nothing=True,
)
sql_attack(
    "update B's items",
    f"UPDATE workqueue_workitem SET status = 'done' WHERE {B}",
    sees_nothing=True,
)
sql_attack(
    "steal B's held item's claim",
    "UPDATE workqueue_workitem SET claim_token = gen_random_uuid() WHERE id = %(b_held)s",
    sees_nothing=True,
)
sql_attack("delete B's items", f"DELETE FROM workqueue_workitem WHERE {B}")
sql_attack("move own item into B", "UPDATE workqueue_workitem SET org_id = %(b_org)s")
sql_attack(
    "re-author own item as B's user", "UPDATE workqueue_workitem SET created_by = %(b_user)s"
)
sql_attack(
    "insert an item into B",
    "INSERT INTO workqueue_workitem (id, org_id, kind, lane, status, payload, priority,"
    " available_at, attempts, max_attempts, last_error, created_by, updated_by, created_at,"
    " updated_at) VALUES (gen_random_uuid(), %(b_org)s, 'NOOP', 'default', 'pending', '{}',"
    " 0, now(), 0, 5, '', %(b_user)s, %(b_user)s, now(), now())",
)
sql_attack("delete B's outbox rows", f"DELETE FROM workqueue_outbox_outboxrow WHERE {B}")
sql_attack("mark outbox rows relayed", "UPDATE workqueue_outbox_outboxrow SET status = 'relayed'")
sql_attack(
    "write an outbox row into B",
    "INSERT INTO workqueue_outbox_outboxrow (id, org_id, kind, payload, actor, status,"
    " last_error, created_at) VALUES (gen_random_uuid(), %(b_org)s, 'work.NOOP', '{}', %(a_user)s,"
    " 'pending', '', now())",
)
sql_attack(
    "forge an audit entry in B",
    "INSERT INTO workqueue_audit_auditentry (id, org_id, actor, action, subject_type,"
    " subject_id, data, created_at) VALUES (gen_random_uuid(), %(b_org)s, %(a_user)s, 'forged',"
    " 'x', 'x', '{}', now())",
)
sql_attack("rewrite audit entries", "UPDATE workqueue_audit_auditentry SET action = 'forged'")
sql_attack("erase audit entries", "DELETE FROM workqueue_audit_auditentry")
sql_attack("rename B's org", "UPDATE workqueue_tenancy_org SET name = 'pwned' WHERE id = %(b_org)s")
sql_attack(
    "join B as owner",
    "INSERT INTO workqueue_tenancy_membership (id, org_id, user_id, role, created_at)"
    " VALUES (gen_random_uuid(), %(b_org)s, %(a_user)s, 'owner', now())",
)
sql_attack("promote own membership", "UPDATE workqueue_tenancy_membership SET role = 'owner'")
sql_attack("read password hashes", "SELECT username, password FROM auth_user")
sql_attack("make B's user a superuser", "UPDATE auth_user SET is_superuser = true")
sql_attack("read B's session", "SELECT session_data FROM django_session")
sql_attack("sign B out", "DELETE FROM django_session WHERE session_key = %(b_session)s")
sql_attack(
    "disable row-level security", "ALTER TABLE workqueue_workitem DISABLE ROW LEVEL SECURITY"
)
sql_attack(
    "unforce row-level security",
    "ALTER TABLE workqueue_outbox_outboxrow NO FORCE ROW LEVEL SECURITY",
)
sql_attack("drop the tenant policy", "DROP POLICY tenant_isolation ON workqueue_workitem")
sql_attack(
    "add a permissive policy",
    "CREATE POLICY open ON workqueue_workitem USING (true) WITH CHECK (true)",
)
sql_attack(
    "turn row security off for the session",
    "SET LOCAL row_security = off; SELECT count(*) FROM workqueue_workitem",
)
sql_attack("become the system login", "SET ROLE workqueue_system")
sql_attack("become the owner", "SET SESSION AUTHORIZATION postgres")
sql_attack("grant itself BYPASSRLS", "ALTER ROLE CURRENT_USER BYPASSRLS")
sql_attack("create a role", "CREATE ROLE sneaky LOGIN BYPASSRLS")


def _b_waiting_step(scene: Scene) -> None:
    """B's own doing: a chain of two, its second step waiting for its first (due in a day)."""
    later = datetime.now(UTC) + timedelta(days=1)
    wf = api.Workflow()
    wf.chain(
        api.NewItem("NOOP", {}, lane=worlds.PARKED, available_at=later),
        api.NewItem("NOOP", {}, lane=worlds.PARKED),
    )
    api.enqueue_workflow(scene.world.b.ctx, wf)


def _planted_edge(scene: Scene) -> None:
    """A writes an edge in its own name (as row-level security lets it) from an item of its own
    to B's waiting step: the statement refuses it, saying why, and stores nothing; B's step
    stays waiting when A's item ends."""
    w = scene.world
    mine, _ = api.enqueue(w.a.ctx, "NOOP", {}, lane=worlds.PARKED)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT id FROM workqueue_workitem WHERE org_id = %s AND status = 'waiting'",
            [w.b.org_id],
        )
        theirs = [r[0] for r in cursor.fetchall()]
    assert theirs
    for child in theirs:
        with pytest.raises(DatabaseError, match="two items of the tenant it is written in"):
            with tenant_scope(w.a.org_id), connections["default"].cursor() as cursor:
                cursor.execute(
                    "INSERT INTO workqueue_dependency (org_id, parent_id, child_id, needs)"
                    " VALUES (%s, %s, %s, 'done')",
                    [w.a.org_id, mine.id, child],
                )
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM workqueue_dependency WHERE parent_id = %s", [mine.id])
        assert cursor.fetchone()[0] == 0, "an edge across tenants was stored"
    token = uuid.uuid4()
    with connections["admin"].cursor() as cursor:  # claimed by A's worker, and completed
        cursor.execute(
            "UPDATE workqueue_workitem SET status = 'claimed', claim_token = %s,"
            " claimed_by = 'x:1:y', claimed_at = now(), attempts = 1, has_dependents = true,"
            " lease_expires_at = now() + interval '1 hour' WHERE id = %s",
            [token, mine.id],
        )
    assert complete_many([runtime.Fence(w.a.org_id, mine.id, token)]) == {mine.id}
    assert {row(child).status for child in theirs} == {"waiting"}


ATTACKS.append(
    Attack(
        "sql",
        "store an edge in A's name to B's waiting step",
        _planted_edge,
        prepare=_b_waiting_step,
    )
)


@attack("sql", "grant the queue to everyone")
def _grant_public(scene: Scene) -> None:
    # A grant by a role without the grant option is a warning, not an error: check its effect.
    as_a(scene.world, "GRANT ALL ON workqueue_workitem, workqueue_audit_auditentry TO PUBLIC")
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = 'PUBLIC'"
            " AND table_name IN ('workqueue_workitem', 'workqueue_audit_auditentry')"
        )
        assert cursor.fetchone()[0] == 0


# The pause table is the operator's (system login): the everyday login has no right on it.
sql_attack(
    "pause every lane through the pause table",
    "INSERT INTO workqueue_pause (lane, kind, paused_by, reason, paused_at)"
    " VALUES ('default', '', 'attacker', '', now())",
)
sql_attack("resume what the operator paused", "DELETE FROM workqueue_pause")
sql_attack("read who paused what", "SELECT * FROM workqueue_pause")
sql_attack("lock the queue for everyone", "LOCK TABLE workqueue_workitem IN ACCESS EXCLUSIVE MODE")
sql_attack("block every claim", "LOCK TABLE workqueue_workitem IN SHARE ROW EXCLUSIVE MODE")
sql_attack("empty the queue", "TRUNCATE workqueue_workitem")
sql_attack("hold the sweep's mutex", "SELECT name FROM workqueue_mutex FOR UPDATE")
sql_attack("plant a mutex row", "INSERT INTO workqueue_mutex (name) VALUES ('workers.sweep')")
sql_attack(
    "plant a security-definer function",
    "CREATE FUNCTION sneaky() RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1'",
)
# Workflow edges: a tenant's own, read under row-level security, never written after they are
# declared; the function that moves waiting steps acts as its caller, under the same fence.
for version in ("v1", "v2"):
    sql_attack(
        f"release B's waiting step through the dependents function ({version})",
        f"SELECT workqueue_move_dependents_{version}(ARRAY[%(b_held)s]::uuid[],"
        " '{done,finished}', -1)",
        sees_nothing=True,
    )
sql_attack(
    "make B's step wait for an item of A's",
    "INSERT INTO workqueue_dependency (org_id, parent_id, child_id, needs)"
    " VALUES (%(b_org)s, %(a_item)s, %(b_held)s, 'done')",
)
sql_attack(
    "make A's item wait for B's held item (an edge in A's name)",
    "INSERT INTO workqueue_dependency (org_id, parent_id, child_id, needs)"
    " VALUES (%(a_org)s, %(b_held)s, %(a_item)s, 'done')",
)
sql_attack(
    "rewrite B's edges",
    "UPDATE workqueue_dependency SET needs = 'finished' WHERE org_id = %(b_org)s",
)
sql_attack("drop B's edges", "DELETE FROM workqueue_dependency WHERE org_id = %(b_org)s")
# A workflow's steps as declared: read under row-level security, never written after.
sql_attack(
    "read B's workflow steps",
    "SELECT count(*) FROM workqueue_workflowstep WHERE org_id = %(b_org)s",
    sees_nothing=True,
)
sql_attack(
    "plant an item of A's among B's workflow's steps",
    "INSERT INTO workqueue_workflowstep (org_id, workflow_id, item_id, place)"
    " VALUES (%(b_org)s, %(b_held)s, %(a_item)s, 0)",
)
sql_attack(
    "rewrite B's workflow steps",
    "UPDATE workqueue_workflowstep SET place = 0 WHERE org_id = %(b_org)s",
)
sql_attack("drop B's workflow steps", "DELETE FROM workqueue_workflowstep WHERE org_id = %(b_org)s")
sql_attack("read a server file", "SELECT pg_read_file('/etc/passwd')")
sql_attack("run a server program", "COPY (SELECT 1) TO PROGRAM 'true'")


# -- claim tokens -------------------------------------------------------------------------------


def _forged(item: api.WorkItem, token: uuid.UUID | None = None) -> api.WorkItem:
    forged = copy.copy(item)
    forged.claim_token = token or uuid.uuid4()
    return forged


def _refused(call: Callable[[], Any]) -> None:
    try:
        result = call()
    except api.Conflict:
        return
    raise AssertionError(f"allowed: {result!r}")


def _unchanged_held(world: World) -> None:
    stored = row(world.a.held.id)
    assert (stored.status, stored.claim_token, stored.attempts) == (
        "claimed",
        world.a.held.claim_token,
        world.a.held.attempts,
    )


def _token_attack(name: str, call: Callable[[World], Any]) -> None:
    def run(scene: Scene) -> None:
        _refused(lambda: call(scene.world))
        _unchanged_held(scene.world)

    ATTACKS.append(Attack("token", name, run))


_token_attack("complete with a guessed token", lambda w: complete(w.a.held_ctx, _forged(w.a.held)))
_token_attack(
    "complete with another item's token",
    lambda w: complete(w.a.held_ctx, _forged(w.a.held, w.b.held.claim_token)),
)
_token_attack(
    "renew with a guessed token",
    lambda w: settle.extend_lease(w.a.held_ctx, _forged(w.a.held), 3600),
)
_token_attack(
    "renew with another item's token",
    lambda w: settle.extend_lease(w.a.held_ctx, _forged(w.a.held, w.b.held.claim_token), 3600),
)
_token_attack(
    "fail with a guessed token", lambda w: settle.fail(w.a.held_ctx, _forged(w.a.held), "x")
)
_token_attack(
    "release with a guessed token", lambda w: settle.release(w.a.held_ctx, _forged(w.a.held), "x")
)
_token_attack(
    "defer with a guessed token", lambda w: settle.defer(w.a.held_ctx, _forged(w.a.held), 3600)
)
_token_attack(
    "complete B's item with its real token through A's context",
    lambda w: complete(w.a.held_ctx, w.b.held),
)
_token_attack(
    "renew B's item with its real token through A's context",
    lambda w: settle.extend_lease(w.a.held_ctx, w.b.held, 3600),
)
_token_attack(
    "complete with the async face and a guessed token",
    lambda w: asyncio.run(_async_complete(w.a.held_ctx, _forged(w.a.held))),
)
_token_attack(
    "fail an orphan with a guessed token",
    lambda w: fail_orphaned(w.a.held.id, uuid.uuid4(), "x"),
)


async def _async_complete(ctx: Any, item: api.WorkItem) -> Any:
    try:
        return await settle.complete.aio(ctx, item)
    finally:
        await aclose_async_store()


def _batch_attack(name: str, fences: Callable[[World], list[runtime.Fence]]) -> None:
    def run(scene: Scene) -> None:
        w = scene.world
        done = complete_many(fences(w))
        renewed = settle.extend_leases(fences(w), 3600)
        reports = [Reported(f, '{"done": 1}', '{"by": "attacker"}') for f in fences(w)]
        reported = write_progress(reports)
        assert done == set() and renewed == set() and reported == set(), (done, renewed, reported)
        _unchanged_held(w)
        assert (row(w.a.held.id).progress, row(w.b.held.id).meta) == (None, {})

    ATTACKS.append(Attack("token", name, run))


_batch_attack(
    "batch-complete, renew and report progress with guessed tokens",
    lambda w: [runtime.Fence(w.a.org_id, w.a.held.id, uuid.uuid4())],
)
_batch_attack(
    "batch-complete B's item naming A as its tenant",
    lambda w: [runtime.Fence(w.a.org_id, w.b.held.id, w.b.held.claim_token)],
)
_batch_attack(
    "batch-complete with B's token on A's item",
    lambda w: [runtime.Fence(w.a.org_id, w.a.held.id, w.b.held.claim_token)],
)


@attack("token", "complete with the token of an earlier claim of the same item")
def _stale_token(scene: Scene) -> None:
    w = scene.world
    rctx = new_request_context(AppType.WORKER)
    settle.release(w.a.held_ctx, w.a.held, "handed back")
    [(ctx, again)] = claim(rctx, worlds.HELD, [NOTE.name], "w2", 300, 1)
    assert again.id == w.a.held.id and again.claim_token != w.a.held.claim_token
    _refused(lambda: complete(ctx, w.a.held))
    assert row(again.id).claim_token == again.claim_token


# -- enqueue and the outbox ---------------------------------------------------------------------


def _noop_items() -> int:
    return api.WorkItem.objects.using("admin").filter(kind="NOOP").count()


@attack("enqueue", "enqueue into A with B's item id")
def _taken_id(scene: Scene) -> None:
    w = scene.world
    before = _noop_items()
    _refused(lambda: api.enqueue(w.a.ctx, "NOOP", {}, id=w.b.parked.id))
    assert _noop_items() == before


@attack("enqueue", "enqueue through the async face with B's item id")
def _taken_id_async(scene: Scene) -> None:
    async def go() -> Any:
        try:
            return await api.aenqueue(scene.world.a.ctx, "NOOP", {}, id=scene.world.b.parked.id)
        finally:
            await aclose_async_store()

    _refused(lambda: asyncio.run(go()))


@attack("enqueue", "enqueue into A with B's idempotency key")
def _their_key(scene: Scene) -> None:
    w = scene.world
    item, outcome = api.enqueue(w.a.ctx, "NOOP", {}, idempotency_key=w.b.key)
    # A's own new item: B's item is neither returned nor touched.
    assert (
        outcome == api.Outcome.INSERTED and item.org_id == w.a.org_id and item.id != w.b.parked.id
    )


@attack("enqueue", "name B's tenant inside the payload")
def _tenant_in_payload(scene: Scene) -> None:
    with pytest.raises(api.InvalidPayload, match=r"payload\.org_id"):
        api.enqueue(scene.world.a.ctx, "NOOP", {"org_id": str(scene.world.b.org_id)})


@attack("enqueue", "SQL in the kind name")
def _kind_injection(scene: Scene) -> None:
    with pytest.raises(api.InvalidPayload, match="kind"):
        api.enqueue(scene.world.a.ctx, "NOOP'; DROP TABLE workqueue_workitem; --", {})


@attack("enqueue", "SQL in the claim's lane filter")
def _lane_injection(scene: Scene) -> None:
    rctx = new_request_context(AppType.WORKER)
    with pytest.raises(api.InvalidPayload, match="lane"):
        claim(rctx, "default' OR '1'='1", None, "w", 30, 100)


@attack("enqueue", "SQL and JSON in the idempotency key are stored as text, run as nothing")
def _key_injection(scene: Scene) -> None:
    crafted = 'k\'); DELETE FROM workqueue_workitem; --","org_id":"' + str(scene.world.b.org_id)
    item, _ = api.enqueue(scene.world.a.ctx, "NOOP", {}, idempotency_key=crafted)
    stored = row(item.id)
    assert (stored.idempotency_key, stored.org_id) == (crafted, scene.world.a.org_id)


@attack("outbox", "emit work into B by naming it in the payload")
def _emit_tenant(scene: Scene) -> None:
    with pytest.raises(api.InvalidPayload, match=r"payload\.org_id"):
        emit(scene.world.a.ctx, "work.NOOP", {"org_id": str(scene.world.b.org_id)})


@attack("outbox", "SQL in an outbox kind")
def _emit_kind(scene: Scene) -> None:
    with pytest.raises(api.InvalidPayload, match="kind"):
        emit(scene.world.a.ctx, "work.NOOP'; --", {})
    with pytest.raises(api.InvalidPayload, match="kind"):
        emit(scene.world.a.ctx, "chan; NOTIFY work_available", {})


@attack("outbox", "a raw outbox row of A's carrying B's item id, relayed")
def _outbox_taken_id(scene: Scene) -> None:
    w = scene.world
    as_a(
        w,
        "INSERT INTO workqueue_outbox_outboxrow (id, org_id, kind, payload, actor, status,"
        " last_error, created_at) VALUES (%(b_item)s, %(a_org)s, 'work.NOOP', '{}', %(a_user)s,"
        " 'pending', '', now())",
    )
    relay_pending(new_request_context(AppType.WORKER))
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT status, last_error FROM workqueue_outbox_outboxrow WHERE id = %s",
            [w.b.parked.id],
        )
        status, error = cursor.fetchone()
    assert status == "failed" and "taken" in error, (status, error)
    assert not api.WorkItem.objects.using("admin").filter(id=w.b.parked.id, org_id=w.a.org_id)


# -- the web process ----------------------------------------------------------------------------


@attack("http", "X-Org-ID header naming B's org")
def _header_org(scene: Scene) -> None:
    response = client_of(scene.world).get("/admin/login/", HTTP_X_ORG_ID=str(scene.world.b.org_id))
    assert response.status_code == 403


@attack("http", "SQL in the X-Org-ID header")
def _header_injection(scene: Scene) -> None:
    response = client_of(scene.world).get("/admin/login/", HTTP_X_ORG_ID="' OR '1'='1")
    assert response.status_code == 403


@override_settings(ROOT_URLCONF="tests.web_urls")
def _tenant_seen(client: Client, path: str = "/test/tenant/", **headers: str) -> str:
    return client.get(path, **headers).content.decode()


@attack("http", "B's org in the query string")
def _query_org(scene: Scene) -> None:
    w = scene.world
    seen = _tenant_seen(client_of(w), f"/test/tenant/?org_id={w.b.org_id}&X-Org-ID={w.b.org_id}")
    assert seen == str(w.a.org_id)


@attack("http", "B's org planted in the session")
def _session_org(scene: Scene) -> None:
    w = scene.world
    client = client_of(w)
    session = client.session
    session["org_id"] = str(w.b.org_id)
    session.save()
    assert _tenant_seen(client) == str(w.a.org_id)


@attack("http", "a forged X-Request-ID")
def _request_id(scene: Scene) -> None:
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        response = client_of(scene.world).get(
            "/test/tenant/", HTTP_X_REQUEST_ID="1'; DROP TABLE x; --"
        )
    assert isinstance(response.wsgi_request.rctx.request_id, uuid.UUID)


@attack("http", "SQL in the traceparent header of an enqueueing request")
def _traceparent(scene: Scene) -> None:
    with override_settings(ROOT_URLCONF="tests.web_urls"):
        response = client_of(scene.world).post(
            "/test/enqueue/", HTTP_TRACEPARENT="00-'; DROP TABLE workqueue_workitem; --"
        )
    assert response.status_code == 201, response.status_code
    stored = row(uuid.UUID(response.content.decode()))
    assert stored.traceparent is None or re.fullmatch(
        r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", stored.traceparent
    )


@attack("http", "admin login without a CSRF token")
def _csrf_login(scene: Scene) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/admin/login/", {"username": "x", "password": "y"})
    assert response.status_code == 403


@attack("http", "admin logout without a CSRF token")
def _csrf_logout(scene: Scene) -> None:
    client = client_of(scene.world)
    client.handler.enforce_csrf_checks = True
    assert client.post("/admin/logout/").status_code == 403
    assert "_auth_user_id" in client.session


@attack("http", "SQL in the admin login's username")
def _login_injection(scene: Scene) -> None:
    client = Client()
    response = client.post("/admin/login/", {"username": "' OR 1=1 --", "password": "' OR 1=1 --"})
    assert response.status_code == 200 and "_auth_user_id" not in client.session


@attack("http", "a tenant member who is not staff opens the admin")
def _admin_not_staff(scene: Scene) -> None:
    response = client_of(scene.world).get("/admin/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@attack("http", "the web /metrics, /metrics/queue or /healthz carries B's data")
def _web_metrics(scene: Scene) -> None:
    for path in ("/metrics", "/metrics/queue", "/healthz"):
        page = Client().get(path).content.decode()
        no_tenant_data(scene.world, page)
    assert Client().post("/metrics/queue").status_code == 405


# -- a real worker's endpoint -------------------------------------------------------------------


def _run_b_secret(scene: Scene) -> None:
    """B's secret item is run by the endpoint's worker, so its counters saw it."""
    w = scene.world
    scene.endpoint.url("/")
    item, _ = api.enqueue(w.b.ctx, NOTE.name, {"note": SECRET}, idempotency_key=w.b.key + "-run")
    deadline = time.monotonic() + 30
    while row(item.id).status != "done":
        assert time.monotonic() < deadline, "the endpoint's worker did not run B's item"
        time.sleep(0.05)


@attack("worker", "the worker's /metrics carries payloads or tenant data", _run_b_secret)
def _worker_metrics(scene: Scene) -> None:
    status, page = scene.endpoint.get("/metrics")
    assert status == 200 and f'workqueue_worker_completed_total{{kind="{NOTE.name}"}}' in page
    no_tenant_data(scene.world, page)


@attack("worker", "the worker's /healthz carries payloads or tenant data", _run_b_secret)
def _worker_healthz(scene: Scene) -> None:
    status, page = scene.endpoint.get("/healthz")
    assert status == 200 and set(json.loads(page)) == {"worker", "state", "healthy", "beat_age_s"}
    no_tenant_data(scene.world, page)


@attack("worker", "the worker's endpoint asked for B's tenant in the query string")
def _worker_query(scene: Scene) -> None:
    status, page = scene.endpoint.get(f"/metrics?org_id={scene.world.b.org_id}")
    assert status == 404 or str(scene.world.b.org_id) not in page


@attack("worker", "a write to the worker's endpoint")
def _worker_post(scene: Scene) -> None:
    status, _ = scene.endpoint.get("/metrics", method="POST")
    assert status in (405, 501)


@attack("worker", "a path outside the worker's endpoint")
def _worker_path(scene: Scene) -> None:
    status, page = scene.endpoint.get("/../../etc/passwd")
    assert status == 404 and "root:" not in page


# -- the table ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    holder = Endpoint()
    yield holder
    holder.stop()


@pytest.fixture
def scene(endpoint: Endpoint, settings) -> Scene:  # type: ignore[no-untyped-def]
    # The world's lanes are the site's (the API refuses a lane the site does not declare).
    settings.WORKQUEUE = {**settings.WORKQUEUE, "LANES": ["default", worlds.PARKED, worlds.HELD]}
    return Scene(worlds.build(), endpoint)


@pytest.mark.parametrize("case", ATTACKS, ids=str)
def test_the_attack_is_refused(scene: Scene, case: Attack) -> None:
    if case.prepare is not None:
        case.prepare(scene)
    before = worlds.fingerprint(scene.world)
    summary.count(SUITE, "cases")
    case.run(scene)
    after = worlds.fingerprint(scene.world)
    assert after == before, worlds.changes(before, after)
    summary.count(SUITE, "refused")
    summary.count(SUITE, f"surface:{case.surface}")


def test_the_table_has_every_surface_and_forty_cases() -> None:
    surfaces = {case.surface for case in ATTACKS}
    assert surfaces == {
        "sql",
        "token",
        "enqueue",
        "outbox",
        "http",
        "worker",
        "api",
        "admin",
        "demo",
        "tasks",
    }
    assert len(ATTACKS) >= 40
    names = [str(case) for case in ATTACKS]
    assert len(names) == len(set(names)), "two rows share a name"
