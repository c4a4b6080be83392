"""Two tenants for the attack table: A (the attacker's) and B (the victim), each with a
member and a staff user (the admin role), a parked pending item (with an idempotency key), an
item held under a claim, a dead letter, an outbox row, an audit entry, an API answer stored
under an ``Idempotency-Key``, a ``django.tasks`` result and a booked shipment (with its notice's
work); B's member has a signed-in session. ``fingerprint`` reads every row of B's, in every
tenant table, as the owner, so each attack can be checked for leaving B exactly as it was.
"""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections

from audit.services import append
from outbox.emit import emit
from outbox.relay import relay_pending
from tenancy.contexts import AppType, OpContext, Role, new_request_context
from tenancy.current import using_context
from tenancy.models import Org
from tenancy.rls import tenant_tables
from tenancy.scope import tenant_scope
from tests import tasks
from tests.factories import MembershipFactory, OrgFactory, UserFactory
from tests.helpers import dead_letter
from tests.security.kinds import NOTE
from workers.demo.models import Shipment
from workqueue import api
from workqueue import idempotency as request_keys
from workqueue.claim import claim
from workqueue.views import item_json

# B's secret: it must never show up where A, or an endpoint, can read it.
SECRET = "b-secret-4f1d9c"
# Lanes no test worker serves: the world's items stay where the attacks find them.
PARKED, HELD = "sec-parked", "sec-held"
# The body of the API request each tenant's member made with its ``answer_key``.
API_PATH = "/api/work/"
API_BODY = {"kind": "NOOP", "payload": {"n": 7}, "lane": PARKED, "run_at": "2100-01-01T00:00:00Z"}


@dataclass
class Tenant:
    ctx: OpContext
    parked: api.WorkItem  # pending, due in a day
    held: api.WorkItem  # claimed by this world, with its live claim token
    held_ctx: OpContext
    outbox_id: uuid.UUID
    key: str
    staff: OpContext  # a staff user with the admin role: the tenant's admin
    dead: api.WorkItem  # failed for good (a SEC_NOTE, B's carrying the secret)
    answer_key: str  # an Idempotency-Key whose API answer is stored (API_BODY)
    answer_item: uuid.UUID  # the item that answer names
    task_id: str  # a django.tasks result (tests.tasks.add), not run
    shipment: uuid.UUID  # booked in the demo's way, its reference B's secret
    shipment_work: uuid.UUID  # the shipment's notice: its outbox row and relayed item

    @property
    def org_id(self) -> uuid.UUID:
        return self.ctx.org_id

    @property
    def user_id(self) -> uuid.UUID:
        return self.ctx.user_id


@dataclass
class World:
    a: Tenant
    b: Tenant
    b_session_key: str

    def params(self) -> dict[str, Any]:
        """What raw SQL attacks may name: B's ids and A's own."""
        return {
            "a_org": self.a.org_id,
            "a_item": self.a.held.id,
            "a_user": self.a.user_id,
            "a_staff": self.a.staff.user_id,
            "b_org": self.b.org_id,
            "b_item": self.b.parked.id,
            "b_held": self.b.held.id,
            "b_user": self.b.user_id,
            "b_outbox": self.b.outbox_id,
            "b_session": self.b_session_key,
            "b_staff": self.b.staff.user_id,
        }


def _member(org: Org, role: Role = Role.MEMBER, staff: bool = False) -> OpContext:
    # The site's users have integer keys (auth.User). A world's users get keys no page shows
    # by chance (a small one is a page number, a count), so that "B's user id is on A's page"
    # means the page leaked it.
    user = UserFactory(id=secrets.randbelow(10**9) + 10**9, is_staff=staff)
    m = MembershipFactory(org=org, user=user, role=role)
    rctx = new_request_context(AppType.WEB)
    return OpContext(org_id=m.org_id, user_id=m.user_id, role=Role(m.role), rctx=rctx)


def _stored_answer(ctx: OpContext, key: str) -> uuid.UUID:
    """What ``POST /api/work/`` with ``Idempotency-Key: key`` and ``API_BODY`` stores: the
    key's claim, the item and the answer, in one transaction of the tenant's."""
    with tenant_scope(ctx.org_id):
        claim = request_keys.claim_key(
            ctx, key, request_keys.fingerprint("POST", API_PATH, API_BODY)
        )
        assert not isinstance(claim, request_keys.Stored)
        item, outcome = api.enqueue(
            ctx,
            API_BODY["kind"],
            API_BODY["payload"],
            lane=PARKED,
            available_at=datetime(2100, 1, 1, tzinfo=UTC),
        )
        request_keys.store_response(
            ctx, claim, 201, {"item": item_json(item), "outcome": outcome.value}
        )
    return item.id


def _book(ctx: OpContext, reference: str) -> tuple[uuid.UUID, uuid.UUID]:
    """A shipment and its notice's outbox row, as the demo page books them."""
    with tenant_scope(ctx.org_id):
        shipment = Shipment.objects.create(
            org_id=ctx.org_id, reference=reference, recipient_email="r@example.com"
        )
        work_id = emit(
            ctx,
            "work.NOTIFY_SHIPMENT",
            {"shipment_id": str(shipment.id), "version": 1, "channel": "email", "lane": PARKED},
        )
    return shipment.id, work_id


def build() -> World:
    from django.contrib.sessions.backends.db import SessionStore

    tag = uuid.uuid4().hex[:8]
    orgs = {name: OrgFactory(name=f"{name}-org-{tag}") for name in ("a", "b")}
    ctxs = {name: _member(org) for name, org in orgs.items()}
    later = datetime.now(UTC) + timedelta(days=1)
    worker = new_request_context(AppType.WORKER)
    made: dict[str, dict[str, Any]] = {}
    for name, ctx in ctxs.items():
        key = f"{name}-key-{tag}"
        parked, _ = api.enqueue(
            ctx, "NOOP", {"n": 1}, idempotency_key=key, lane=PARKED, available_at=later
        )
        note = SECRET if name == "b" else "a's own"
        api.enqueue(ctx, NOTE.name, {"note": note}, lane=HELD)
        outbox_id = emit(ctx, "work.NOOP", {"n": 3, "lane": PARKED})
        append(ctx, "probe", ("probe", ctx.org_id), {"secret": SECRET if name == "b" else ""})
        dead_note = {"note": SECRET if name == "b" else "a's own dead letter"}
        with using_context(ctx):
            task_id = tasks.add.enqueue(1, 2).id
        shipment, shipment_work = _book(ctx, f"{SECRET}-parcel" if name == "b" else "a-parcel")
        made[name] = {
            "ctx": ctx,
            "parked": parked,
            "outbox_id": outbox_id,
            "key": key,
            "staff": _member(orgs[name], Role.ADMIN, staff=True),
            "dead": dead_letter(
                ctx,
                worker,
                payload=dead_note,
                kind=NOTE.name,
                traceback=f"Traceback: {SECRET} in B's attempt" if name == "b" else "a's traceback",
            ),
            "answer_key": f"{name}-answer-{tag}",
            "answer_item": _stored_answer(ctx, f"{name}-answer-{tag}"),
            "task_id": task_id,
            "shipment": shipment,
            "shipment_work": shipment_work,
        }
    for held_ctx, held in claim(worker, HELD, [NOTE.name], "w", 300, 2):
        name = "a" if held.org_id == ctxs["a"].org_id else "b"
        made[name].update(held=held, held_ctx=held_ctx)
        # A workflow step waiting for the held item (an edge, a waiting item).
        workflow = api.Workflow()
        workflow.step("NOOP", {"n": 9}, lane=PARKED, after=[held.id])
        api.enqueue_workflow(ctxs[name], workflow)
    # Relayed now, so no worker's relayer changes B's rows while an attack runs.
    relay_pending(worker)
    session = SessionStore()
    session["_auth_user_id"] = str(ctxs["b"].user_id)
    session.create()
    return World(Tenant(**made["a"]), Tenant(**made["b"]), session.session_key)


# The gauges page's minutes: the sweep's rollup of B's own work (a worker an attack starts sweeps
# on its own clock, and may sample B's pending items at a minute's turn), written by the system
# login only (the everyday login may only read them): no attacker's change.
SWEEP_DERIVED = frozenset({"workqueue_laneminute", "workqueue_kindminute"})


def _b_rows() -> dict[str, str]:
    """Every table holding B's rows, and how to pick them out: each tenant table (items,
    outbox, audit, stored answers, task records, shipments, shares, memberships, the org), B's
    users and B's session."""
    found = {
        table: f"{column} = %(b_org)s"
        for table, column in tenant_tables().items()
        if table not in SWEEP_DERIVED
    }
    found["auth_user"] = "id IN (%(b_user)s, %(b_staff)s)"
    found["django_session"] = "session_key = %(b_session)s"
    return found


def fingerprint(world: World) -> dict[str, list[str]]:
    """Every row of B's, as text, read as the owner."""
    found = {}
    with connections["admin"].cursor() as cursor:
        for table, where in _b_rows().items():
            cursor.execute(
                f"SELECT row_to_json(t)::text FROM {table} t WHERE {where} ORDER BY 1",
                world.params(),
            )
            found[table] = [r[0] for r in cursor.fetchall()]
    return found


def changes(before: dict[str, list[str]], after: dict[str, list[str]]) -> str:
    """What changed in B's rows, field by field, for the failure message."""
    out = []
    for table in before:
        old = {r["id"] if "id" in r else str(r): r for r in map(json.loads, before[table])}
        new = {r["id"] if "id" in r else str(r): r for r in map(json.loads, after[table])}
        for key in old.keys() | new.keys():
            a, b = old.get(key, {}), new.get(key, {})
            fields = {f: (a.get(f), b.get(f)) for f in a.keys() | b.keys() if a.get(f) != b.get(f)}
            if fields:
                out.append(f"{table} {key}: {fields}")
    return "B's rows changed: " + "; ".join(out)
