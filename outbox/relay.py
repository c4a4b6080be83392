"""The relay: turn pending outbox rows into work items and notifications, across tenants.

``relay_pending`` locks a batch of pending rows on the system login (``SKIP LOCKED``: relayers
never wait on each other) and keeps them locked until it marks them: a ``work.<KIND>`` row
becomes a work item through ``enqueue_relayed`` (the row's id is the item's id, so relaying a
row twice, or after a crash between the enqueue and the mark, leaves one item); any other row
is published with ``pg_notify`` on the channel its kind names. ``purge_relayed`` and
``read_lag`` serve the sweep.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from django.db import transaction

from outbox.models import WORK_PREFIX
from tenancy.contexts import RequestContext
from workqueue import runtime
from wqcore.conf import system_alias, wq_settings
from wqcore.logs import log_event
from wqcore.statements import NoParams, Statement
from wqcore.store import System, execute

logger = logging.getLogger(__name__)

SQL_DIR = Path(__file__).with_name("sql")


class TakePendingParams(NamedTuple):
    limit: int


class MarkRelayedParams(NamedTuple):
    ids: list[uuid.UUID]
    errors: list[str | None]


class PendingTenantsParams(NamedTuple):
    limit: int


class TakePendingCitusParams(NamedTuple):
    org_id: uuid.UUID
    limit: int


class MarkRelayedCitusParams(NamedTuple):
    org_id: uuid.UUID
    ids: list[uuid.UUID]
    errors: list[str | None]


class PublishParams(NamedTuple):
    channel: str
    message: str


class PurgeRelayedParams(NamedTuple):
    before: datetime
    batch: int


def _statement(name: str, params: type[NamedTuple]) -> Statement:
    return Statement(name, params, SQL_DIR)


TAKE_PENDING = _statement("take_pending", TakePendingParams)
MARK_RELAYED = _statement("mark_relayed", MarkRelayedParams)
PUBLISH = _statement("publish", PublishParams)
PURGE_RELAYED = _statement("purge_relayed", PurgeRelayedParams)
READ_LAG = _statement("read_lag", NoParams)
# The Citus forms (WORKQUEUE["CITUS"]): the tenants with pending rows read without a lock, then
# each one's rows taken and marked on its node (FOR UPDATE across nodes is refused).
PENDING_TENANTS = _statement("pending_tenants", PendingTenantsParams)
TAKE_PENDING_CITUS = _statement("take_pending_citus", TakePendingCitusParams)
MARK_RELAYED_CITUS = _statement("mark_relayed_citus", MarkRelayedCitusParams)


@dataclass(frozen=True)
class RelayResult:
    enqueued: int = 0
    published: int = 0
    failed: int = 0

    @property
    def total(self) -> int:
        return self.enqueued + self.published + self.failed


def _relay_one(row: Any) -> tuple[str, str | None]:
    """Relay one locked row; returns what became of it and, for a failure, why."""
    row_id, org_id, kind, payload, actor, request_id, traceparent = row
    if isinstance(payload, str):
        payload = json.loads(payload)
    if kind.startswith(WORK_PREFIX):
        relayed = runtime.Relayed(
            row_id, kind[len(WORK_PREFIX) :], payload, actor, request_id, traceparent
        )
        try:
            runtime.enqueue_relayed(org_id, relayed)
        except (
            runtime.InvalidPayload
        ) as exc:  # the kind left this release since the row was written
            return "failed", str(exc)
        except runtime.Conflict as exc:  # the id is another tenant's item: nothing can be written
            return "failed", str(exc)
        return "enqueued", None
    message = json.dumps({"id": str(row_id), "org_id": str(org_id), "payload": payload})
    execute(System(PUBLISH, PublishParams(kind, message)))
    return "published", None


def relay_pending(rctx: RequestContext, limit: int = 100) -> RelayResult:
    """Relay up to ``limit`` pending rows, oldest first, in one transaction on the system login
    that holds their locks until they are marked; returns how many became what.

    Takes no tenant: the relay serves every tenant's outbox, so it reads across tenants on the
    system login and each row carries its tenant, under which its work is enqueued.
    """
    counts = {"enqueued": 0, "published": 0, "failed": 0}
    if not wq_settings.CITUS:
        _relay_taken(
            System(TAKE_PENDING, TakePendingParams(int(limit))),
            lambda ids, errors: System(MARK_RELAYED, MarkRelayedParams(ids, errors)),
            counts,
        )
    else:
        tenants = execute(System(PENDING_TENANTS, PendingTenantsParams(int(limit))))
        for (org_id,) in tenants.rows:
            room = int(limit) - sum(counts.values())
            if room < 1:
                break
            _relay_taken(
                System(TAKE_PENDING_CITUS, TakePendingCitusParams(org_id, room)),
                functools.partial(_mark_citus, org_id),
                counts,
            )
    if not any(counts.values()):
        return RelayResult()
    result = RelayResult(**counts)
    log_event(
        logger,
        logging.INFO,
        "outbox_relayed",
        enqueued=result.enqueued,
        published=result.published,
        failed=result.failed,
    )
    return result


def _mark_citus(org_id: uuid.UUID, ids: list[uuid.UUID], errors: list[str | None]) -> System:
    return System(MARK_RELAYED_CITUS, MarkRelayedCitusParams(org_id, ids, errors))


def _relay_taken(
    take: System,
    mark: Callable[[list[uuid.UUID], list[str | None]], System],
    counts: dict[str, int],
) -> None:
    """In one transaction on the system login: the rows ``take`` locks, each relayed, then
    marked by the step ``mark`` makes of their ids and errors; adds what became of them to
    ``counts``."""
    with transaction.atomic(using=system_alias()):
        taken = execute(take)
        if not taken.rows:
            return
        ids: list[uuid.UUID] = []
        errors: list[str | None] = []
        for row in taken.rows:
            outcome, error = _relay_one(row)
            counts[outcome] += 1
            ids.append(row[0])
            errors.append(error)
            if error:
                log_event(
                    logger,
                    logging.WARNING,
                    "outbox_row_failed",
                    row=str(row[0]),
                    kind=row[2],
                    error=error,
                )
        execute(mark(ids, errors))


def relay_all(rctx: RequestContext, batch: int = 100, max_batches: int = 100) -> RelayResult:
    """``relay_pending`` until a batch comes back short (nothing more waits) or
    ``max_batches`` ran: bounded, so one pass never runs unbounded."""
    total = RelayResult()
    for _ in range(max_batches):
        done = relay_pending(rctx, batch)
        total = RelayResult(
            total.enqueued + done.enqueued,
            total.published + done.published,
            total.failed + done.failed,
        )
        if done.total < batch:
            break  # a short batch: nothing more is pending
    return total


def purge_relayed(
    rctx: RequestContext, before: datetime, batch: int = 1000, max_batches: int = 100
) -> int:
    """Delete relayed rows relayed before ``before``, in every tenant, in bounded batches;
    returns how many. Failed rows stay for a human.

    Takes no tenant: retention is the operator's rule for the whole table; system login.
    """
    total = 0
    for _ in range(max_batches):
        rows = execute(System(PURGE_RELAYED, PurgeRelayedParams(before, int(batch))))
        deleted = rows.rows[0][0]
        total += deleted
        if deleted < batch:
            break  # a short batch: nothing more is old enough
    if total:
        log_event(logger, logging.INFO, "outbox_purged", count=total, before=before.isoformat())
    return total


@dataclass(frozen=True)
class Lag:
    # Seconds the oldest pending row has waited (0 when none waits).
    oldest_s: float
    pending: int


def read_lag(rctx: RequestContext) -> Lag:
    """How far behind the relay is: the oldest pending row's age and the pending count.

    Takes no tenant: the lag describes the whole outbox for the operator; system login.
    """
    rows = execute(System(READ_LAG, NoParams()))
    oldest, pending = rows.rows[0]
    return Lag(float(oldest), int(pending))
