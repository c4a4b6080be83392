"""The fence a triage action presents: the items as the operator's page drew them."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.utils.dateparse import parse_datetime

from tenancy.contexts import OpContext
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import check_id
from workqueue.models import Status, WorkItem
from workqueue.rows import items_of
from wqcore.logs import log_event
from wqcore.store import Rows

logger = logging.getLogger("workqueue.triage")

# The most items one triage call changes: a confirmation page lists each one.
MAX_BATCH = 100
# The longest delay a requeue takes (30 days).
MAX_DELAY_S = 30 * 86400
# What each action may act on: a claimed item is its holder's (the claim token fences it).
REQUEUEABLE = frozenset({Status.FAILED.value})
DISCARDABLE = frozenset({Status.FAILED.value, Status.PENDING.value, Status.WAITING.value})


class Drawn(NamedTuple):
    """An item as the operator saw it: the fence a triage action presents."""

    id: uuid.UUID
    status: str
    updated_at: datetime

    @classmethod
    def of(cls, item: WorkItem) -> Drawn:
        return cls(item.id, item.status, item.updated_at)

    def token(self) -> str:
        """The fence as one string, for a hidden form field (``parse`` reads it back)."""
        return f"{self.id}|{self.status}|{self.updated_at.isoformat()}"

    @classmethod
    def parse(cls, text: Any) -> Drawn:
        """A fence from ``token``'s string, or ``InvalidPayload`` naming the field."""
        parts = text.split("|") if isinstance(text, str) and len(text) <= 200 else []
        if len(parts) != 3:
            raise InvalidPayload("fence: must be id|status|updated_at, as the page drew it")
        item_id = check_id(parts[0], "fence.id")
        if parts[1] not in Status.values:
            raise InvalidPayload("fence.status: not a status")
        try:
            when = parse_datetime(parts[2])
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            raise InvalidPayload("fence.updated_at: must be a timestamp with a time zone")
        return cls(item_id, parts[1], when)


@dataclass(frozen=True)
class Triaged:
    # The items the action changed, as they are now.
    changed: list[WorkItem]
    # The items left as they were: changed since the page was drawn (or not in the tenant).
    refused: list[uuid.UUID]


class TriageParams(NamedTuple):
    ids: list[uuid.UUID]
    statuses: list[str]
    updated_ats: list[datetime]
    # Who the audit entries name: the operator, and their request.
    actor: str
    request_id: uuid.UUID

    @classmethod
    def of(cls, ctx: OpContext, fences: Sequence[Drawn]) -> TriageParams:
        """The fences as the statement takes them, signed by ``ctx``'s user."""
        return cls(
            [f.id for f in fences],
            [f.status for f in fences],
            [f.updated_at for f in fences],
            ctx.user_id,
            ctx.request_id,
        )


def checked_fences(drawn: Sequence[Drawn], allowed: frozenset[str], action: str) -> list[Drawn]:
    """The fences to present, or ``InvalidPayload``: 1 to ``MAX_BATCH`` distinct items, each
    drawn in a status the action may act on."""
    fences = list(dict.fromkeys(drawn))
    if not fences:
        raise InvalidPayload("items: select at least one item")
    if len(fences) > MAX_BATCH:
        raise InvalidPayload(f"items: at most {MAX_BATCH} at a time (got {len(fences)})")
    for fence in fences:
        if not isinstance(fence, Drawn):
            raise InvalidPayload(f"items: must be Drawn fences, got {type(fence).__name__}")
        if fence.status not in allowed:
            raise InvalidPayload(
                f"items: {action} acts on {' or '.join(sorted(allowed))} items; "
                f"{fence.id} is {fence.status}"
            )
    return fences


def check_delay(delay_s: Any) -> float:
    """A requeue's delay in seconds, or ``InvalidPayload`` saying what it may be."""
    if (
        isinstance(delay_s, bool)
        or not isinstance(delay_s, int | float)
        or not math.isfinite(delay_s)
        or not 0 <= delay_s <= MAX_DELAY_S
    ):
        raise InvalidPayload(f"delay: must be 0 to {MAX_DELAY_S} seconds (30 days)")
    return float(delay_s)


def result_of(fences: list[Drawn], rows: Rows) -> Triaged:
    changed = items_of(rows)
    done = {item.id for item in changed}
    return Triaged(changed, [f.id for f in fences if f.id not in done])


def log_triaged(event: str, ctx: OpContext, result: Triaged) -> None:
    log_event(
        logger,
        logging.INFO,
        event,
        tenant=str(ctx.org_id),
        actor=ctx.user_id,
        changed=len(result.changed),
        refused=len(result.refused),
    )
