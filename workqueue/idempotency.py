"""Answer a request sent with an ``Idempotency-Key`` once: a retry gets the stored answer.

The enqueue API claims the key first (``claim_request_key``), in the request's own
transaction, then does the work and stores its answer (``store_response``) in the same
transaction. A retry with the same key and the same request (``fingerprint``) gets the stored
answer back; the same key with another request is refused (``KeyReused``); a retry that races
the first waits on the key's unique index until the first commits (then reads its answer) or
rolls back (then claims the key itself). Keys belong to one user in one tenant, under
row-level security. ``purge_request_keys`` (the sweep) deletes answers past their retention.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from tenancy.contexts import OpContext, RequestContext
from workqueue import SQL_DIR
from workqueue.exceptions import InvalidPayload, WorkQueueError
from workqueue.models import new_item_id
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, Tenant, transition

logger = logging.getLogger(__name__)

KEY_MAX = 200  # StoredResponse.key
# Visible ASCII only: a key travels in a header and in logs.
_KEY = re.compile(r"[\x21-\x7e]+")
# How long an answer is kept (the sweep's purge reads IDEMPOTENCY_KEY_RETENTION_S).
DEFAULT_RETENTION_S = 24 * 3600


class KeyReused(WorkQueueError):
    """The key was used before for a different request: nothing was done (HTTP 422)."""


class KeyInFlight(WorkQueueError):
    """The key's first request has not stored its answer yet (HTTP 409)."""


class ClaimKeyParams(NamedTuple):
    id: uuid.UUID
    org_id: uuid.UUID
    user_id: str
    key: str
    fingerprint: str


class ReadKeyParams(NamedTuple):
    user_id: str
    key: str


class StoreResponseParams(NamedTuple):
    id: uuid.UUID
    status_code: int
    body: str  # JSON text


class PurgeKeysParams(NamedTuple):
    before: datetime
    batch: int


CLAIM_REQUEST_KEY = Statement("claim_request_key", ClaimKeyParams, SQL_DIR)
READ_REQUEST_KEY = Statement("read_request_key", ReadKeyParams, SQL_DIR)
STORE_RESPONSE = Statement("store_response", StoreResponseParams, SQL_DIR)
PURGE_REQUEST_KEYS = Statement("purge_request_keys", PurgeKeysParams, SQL_DIR)


@dataclass(frozen=True)
class Stored:
    """A previous request's answer under the same key."""

    status_code: int
    body: Any


def check_key(value: Any, field: str = "Idempotency-Key") -> str:
    """An idempotency key: 1 to 200 visible ASCII characters, or ``InvalidPayload``."""
    if not isinstance(value, str) or not value:
        raise InvalidPayload(f"{field}: must be a non-empty string")
    if len(value) > KEY_MAX or not _KEY.fullmatch(value):
        raise InvalidPayload(f"{field}: must be 1 to {KEY_MAX} visible ASCII characters")
    return value


def fingerprint(method: str, path: str, body: Any) -> str:
    """What makes two requests the same: method, path and the body as canonical JSON (key
    order and spacing do not count)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(f"{method}\n{path}\n".encode())
    digest.update(canonical.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


@transition
def claim_key(ctx: OpContext, key: str, print_: str) -> Plan[uuid.UUID | Stored]:
    """Claim ``key`` for this user's request in the context's tenant: its claim id when the
    request should go ahead (then ``store_response``), or the ``Stored`` answer of an earlier
    identical request. Raises ``KeyReused`` for a different request under the same key and
    ``KeyInFlight`` when the earlier one has no answer yet. Joins the caller's transaction
    (a rollback frees the key)."""
    claim_id = new_item_id()
    params = ClaimKeyParams(claim_id, ctx.org_id, ctx.user_id, check_key(key), print_)
    claimed: Rows = yield Tenant(ctx.org_id, CLAIM_REQUEST_KEY, params)
    if claimed.rows:
        return claim_id
    found: Rows = yield Tenant(ctx.org_id, READ_REQUEST_KEY, ReadKeyParams(ctx.user_id, key))
    if not found.rows:  # the holder rolled back between our insert and this read: rare
        raise KeyInFlight(f"Idempotency-Key {key!r} is being used by another request; retry")
    stored_print, status_code, body = found.rows[0]
    if stored_print != print_:
        raise KeyReused(f"Idempotency-Key {key!r} was used for a different request; use a new key")
    if status_code is None:
        raise KeyInFlight(f"Idempotency-Key {key!r} is being used by another request; retry")
    return Stored(int(status_code), json.loads(body) if isinstance(body, str) else body)


@transition
def store_response(ctx: OpContext, claim_id: uuid.UUID, status_code: int, body: Any) -> Plan[None]:
    """Keep the answer given under a claimed key, in the caller's transaction."""
    params = StoreResponseParams(claim_id, int(status_code), json.dumps(body))
    rows: Rows = yield Tenant(ctx.org_id, STORE_RESPONSE, params)
    if not rows.rows:
        raise KeyInFlight("the Idempotency-Key claim was lost before its answer was stored")


@transition
def purge_request_keys(
    rctx: RequestContext, before: datetime, batch: int = 1000, max_batches: int = 100
) -> Plan[int]:
    """Delete stored answers created before ``before``, in every tenant, in batches of
    ``batch`` (at most ``max_batches`` per call); returns how many. A request retried after its
    key was purged is answered anew.

    Takes no tenant: retention is the operator's rule for the whole table, one statement per
    batch across tenants; system login.
    """
    total = 0
    for _ in range(max_batches):
        rows: Rows = yield System(PURGE_REQUEST_KEYS, PurgeKeysParams(before, int(batch)))
        deleted = rows.rows[0][0]
        total += deleted
        if deleted < batch:
            break  # a short batch: nothing more is old enough
    if total:
        log_event(
            logger, logging.INFO, "request_keys_purged", count=total, before=before.isoformat()
        )
    return total
