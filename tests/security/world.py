"""Two tenants for the attack table: A (the attacker's) and B (the victim), each with a
member, a parked pending item (with an idempotency key), an item held under a claim, an outbox
row and an audit entry; B's user has a signed-in session. ``fingerprint`` reads every row of
B's as the owner, so each attack can be checked for leaving B exactly as it was.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections

from audit.services import append
from outbox.emit import emit
from outbox.relay import relay_pending
from tenancy.contexts import AppType, OpContext, new_request_context
from tenancy.models import Role
from tests.factories import MembershipFactory
from tests.security.kinds import NOTE
from workqueue import api

# B's secret: it must never show up where A, or an endpoint, can read it.
SECRET = "b-secret-4f1d9c"
# Lanes no test worker serves: the world's items stay where the attacks find them.
PARKED, HELD = "sec-parked", "sec-held"


@dataclass
class Tenant:
    ctx: OpContext
    parked: api.WorkItem  # pending, due in a day
    held: api.WorkItem  # claimed by this world, with its live claim token
    held_ctx: OpContext
    outbox_id: uuid.UUID
    key: str

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
            "b_org": self.b.org_id,
            "b_item": self.b.parked.id,
            "b_held": self.b.held.id,
            "b_user": self.b.user_id,
            "b_outbox": self.b.outbox_id,
            "b_session": self.b_session_key,
        }


def _member() -> OpContext:
    m = MembershipFactory(role=Role.MEMBER)
    rctx = new_request_context(AppType.WEB)
    return OpContext(org_id=m.org_id, user_id=m.user_id, role=Role(m.role), rctx=rctx)


def build() -> World:
    from django.contrib.sessions.backends.db import SessionStore

    ctxs = {"a": _member(), "b": _member()}
    later = datetime.now(UTC) + timedelta(days=1)
    made: dict[str, dict[str, Any]] = {}
    for name, ctx in ctxs.items():
        key = f"{name}-key-{uuid.uuid4().hex[:8]}"
        parked, _ = api.enqueue(
            ctx, "NOOP", {"n": 1}, idempotency_key=key, lane=PARKED, available_at=later
        )
        note = SECRET if name == "b" else "a's own"
        api.enqueue(ctx, NOTE.name, {"note": note}, lane=HELD)
        outbox_id = emit(ctx, "work.NOOP", {"n": 3, "lane": PARKED})
        append(ctx, "probe", ("probe", ctx.org_id), {"secret": SECRET if name == "b" else ""})
        made[name] = {"ctx": ctx, "parked": parked, "outbox_id": outbox_id, "key": key}
    for held_ctx, held in api.claim(
        new_request_context(AppType.WORKER), HELD, [NOTE.name], "w", 300, 2
    ):
        name = "a" if held.org_id == ctxs["a"].org_id else "b"
        made[name].update(held=held, held_ctx=held_ctx)
    # Relayed now, so no worker's relayer changes B's rows while an attack runs.
    relay_pending(new_request_context(AppType.WORKER))
    session = SessionStore()
    session["_auth_user_id"] = str(ctxs["b"].user_id)
    session.create()
    return World(Tenant(**made["a"]), Tenant(**made["b"]), session.session_key)


# Every table holding B's rows, and how to pick them out.
_B_ROWS = {
    "workqueue_workitem": "org_id = %(b_org)s",
    "outbox_outboxrow": "org_id = %(b_org)s",
    "audit_auditentry": "org_id = %(b_org)s",
    "tenancy_org": "id = %(b_org)s",
    "tenancy_membership": "org_id = %(b_org)s",
    "tenancy_user": "id = %(b_user)s",
    "django_session": "session_key = %(b_session)s",
}


def fingerprint(world: World) -> dict[str, list[str]]:
    """Every row of B's, as text, read as the owner."""
    found = {}
    with connections["admin"].cursor() as cursor:
        for table, where in _B_ROWS.items():
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
