"""emit: write an outbox row in the caller's transaction, beside the domain write it follows."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, NamedTuple

from outbox.models import WORK_PREFIX
from tenancy.contexts import OpContext
from workqueue import runtime
from workqueue.runtime import check_traceparent
from wqcore.conf import wq_settings
from wqcore.statements import Statement
from wqcore.store import Plan, Tenant, run
from wqcore.tracing import current_traceparent

SQL_DIR = Path(__file__).with_name("sql")
# pg_notify carries at most 8,000 bytes; a notification row's message stays well below.
NOTIFICATION_MAX_BYTES = 7000


class EmitParams(NamedTuple):
    id: uuid.UUID
    org_id: uuid.UUID
    kind: str
    payload: str
    actor: str
    request_id: uuid.UUID | None
    traceparent: str | None


EMIT = Statement("emit", EmitParams, SQL_DIR, names_tenant=True)
# Its Citus form (WORKQUEUE["CITUS"]): the tenant named before it (SET LOCAL), not by itself.
EMIT_CITUS = Statement("emit_citus", EmitParams, SQL_DIR)


def _checked(kind: Any, payload: Any) -> str:
    """The payload as it will be stored (JSON text), or ``InvalidPayload`` naming the field.

    A ``work.<KIND>`` row is checked now as its enqueue will check it (the kind is registered,
    the payload fits its schema, its ``lane`` entry is a lane, its ``concurrency_key`` and
    ``rate_key`` entries keys), so the relay never meets a row
    it must refuse. Any other kind names the channel a notification goes out on.
    """
    if not isinstance(payload, dict):
        raise runtime.InvalidPayload(
            f"payload: must be a JSON object, got {type(payload).__name__}"
        )
    if isinstance(kind, str) and kind.startswith(WORK_PREFIX):
        body = dict(payload)
        lane = body.pop("lane", None)
        keys = {name: body.pop(name, None) for name in ("concurrency_key", "rate_key")}
        runtime.validated(runtime.NewItem(kind[len(WORK_PREFIX) :], body, lane=lane, **keys))
    else:
        runtime.check_name("kind", kind, 63)  # a NOTIFY channel name
    if problem := runtime.too_deep(payload):  # json.dumps recurses: refuse before it does
        raise runtime.InvalidPayload(problem)
    try:
        text = json.dumps(payload, allow_nan=False, ensure_ascii=False)
        data = text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise runtime.InvalidPayload(
            runtime.find_unstorable(payload) or f"payload: not JSON-serialisable ({exc})"
        ) from None
    if "\\u0000" in text and (problem := runtime.find_unstorable(payload)):
        raise runtime.InvalidPayload(problem)
    limit = runtime.max_payload_bytes()
    if not kind.startswith(WORK_PREFIX):
        limit = min(limit, NOTIFICATION_MAX_BYTES)
    if len(data) > limit:
        raise runtime.InvalidPayload(
            f"payload: {len(data)} bytes is more than the {limit} allowed "
            + (
                "(WORKQUEUE['MAX_PAYLOAD_BYTES'])"
                if kind.startswith(WORK_PREFIX)
                else "(a notification travels in one NOTIFY)"
            )
        )
    return text


def emit_plan(ctx: OpContext, kind: str, payload: dict[str, Any]) -> Plan[uuid.UUID]:
    params = EmitParams(
        id=runtime.WorkItem._meta.pk.default(),
        org_id=ctx.org_id,
        kind=kind,
        payload=_checked(kind, payload),
        actor=ctx.user_id,
        request_id=ctx.caused_by_request_id or ctx.request_id,
        traceparent=check_traceparent(ctx.rctx.traceparent or current_traceparent()),
    )
    rows = yield Tenant(ctx.org_id, EMIT_CITUS if wq_settings.CITUS else EMIT, params)
    emitted: uuid.UUID = rows.rows[0][0]  # the row's id column
    return emitted


def emit(ctx: OpContext, kind: str, payload: dict[str, Any]) -> uuid.UUID:
    """Write one outbox row in the context's tenant, signed by its user and request, inside
    the caller's transaction (one statement): it is committed with the domain write it follows
    or rolled back with it. Its commit announces it on ``outbox_pending``, so a relayer acts
    within milliseconds; the sweep relays whatever that missed.

    ``kind`` is ``work.<KIND>`` for work to enqueue (``payload`` fits the kind's schema, plus
    an optional ``lane`` and ``concurrency_key``), or any other name for a notification
    published on that channel.
    Returns the row's id, which a work row's item will carry as its id.
    """
    return run(emit_plan(ctx, kind, payload))
