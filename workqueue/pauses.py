"""Pausing: an operator stops every worker from claiming a lane's items, or one kind's in a
lane, and resumes them later.

A pause is a row of ``workqueue_pause`` that the claim statement reads (one index probe per
claim): items of a paused lane or kind stay pending, items already claimed run to their end
(a pause stops claims, not handlers). ``resume`` deletes the row and announces the lane on
``work_available`` in the same statement, so the lane's workers wake at once instead of at
their next poll.

Global, not a tenant's: pauses are the site operator's, set on the system login (the everyday
login has no right on the table). Each change is audited in the same statement, with the
actor, under ``SITE_ORG_ID``, the site's own tenant id in the audit trail: no tenant's
row-level security names it, the operator reads it across tenants.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from audit.api import APPEND_ENTRIES
from workqueue import SQL_DIR
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import check_lane, check_text
from workqueue.kinds import get_kind
from workqueue.lanes import declared_lanes
from wqcore.statements import NoParams, Statement
from wqcore.store import Plan, Rows, System, transition

# The audit trail's tenant id of what concerns the whole site (a pause): no tenant has it.
SITE_ORG_ID = uuid.UUID(int=0)
REASON_MAX = 500  # Pause.reason


class Paused(NamedTuple):
    lane: str
    # Empty: the whole lane.
    kind: str
    paused_by: str
    reason: str
    paused_at: datetime

    @property
    def target(self) -> str:
        """``lane`` or ``lane:kind``, as ``manage.py queue pause`` takes it."""
        return f"{self.lane}:{self.kind}" if self.kind else self.lane


class PauseParams(NamedTuple):
    lane: str
    kind: str
    actor: str
    reason: str
    site_org_id: uuid.UUID
    request_id: uuid.UUID | None


class ResumeParams(NamedTuple):
    lane: str
    kind: str
    site_org_id: uuid.UUID
    actor: str
    request_id: uuid.UUID | None


PAUSE = Statement("pause", PauseParams, SQL_DIR, includes=(APPEND_ENTRIES,))
RESUME = Statement("resume", ResumeParams, SQL_DIR, includes=(APPEND_ENTRIES,))
READ_PAUSES = Statement("read_pauses", NoParams, SQL_DIR)


def parse_target(text: object) -> tuple[str, str | None]:
    """``LANE`` or ``LANE:KIND`` as (lane, kind or None). A kind's name may hold colons too; the
    lane's cannot be empty."""
    if not isinstance(text, str) or not text:
        raise InvalidPayload("target: give LANE or LANE:KIND")
    lane, sep, kind = text.partition(":")
    if sep and not kind:
        raise InvalidPayload(f"target: {text!r} names no kind after the colon")
    return lane, (kind if sep else None)


def _checked(lane: str, kind: str | None) -> tuple[str, str]:
    """The lane and kind ('' for the whole lane) to pause, or ``InvalidPayload`` naming the
    field: a lane no one declared, or a kind the registry does not know, is refused (a typo
    would pause nothing and say it did)."""
    lane = check_lane(lane)
    declared = declared_lanes()
    if lane not in declared:
        raise InvalidPayload(
            f"lane: {lane!r} is not declared (declared: {', '.join(declared)}); "
            "WORKQUEUE['LANES'] or a kind declares a lane"
        )
    if kind is None or kind == "":
        return lane, ""
    return lane, get_kind(kind).name


def _paused(row: Sequence[Any]) -> Paused:
    return Paused(*row[:5])


@transition
def pause(
    actor: str,
    lane: str,
    kind: str | None = None,
    *,
    reason: str = "",
    request_id: uuid.UUID | None = None,
) -> Plan[tuple[Paused, bool]]:
    """Pause ``lane`` (or only ``kind`` in it) for every worker: no item of it is claimed until
    ``resume``; items already claimed run on. Returns the pause and whether this call made it
    (False: it was paused already, by whoever the pause names; nothing changes, nothing is
    audited). ``actor`` signs the audit entry (``queue.paused``).

    Takes no tenant: a lane serves every tenant, so the pause is the site operator's, written on
    the system login. The callers (the admin, ``manage.py queue pause``) check that the user is
    the operator."""
    lane, kind = _checked(lane, kind)
    reason = check_text("reason", reason, REASON_MAX) if reason else ""
    params = PauseParams(lane, kind, actor, reason, SITE_ORG_ID, request_id)
    rows: Rows = yield System(PAUSE, params)
    row = rows.rows[0]
    return _paused(row), bool(row[5])


@transition
def resume(
    actor: str, lane: str, kind: str | None = None, *, request_id: uuid.UUID | None = None
) -> Plan[Paused | None]:
    """Resume ``lane`` (or ``kind`` in it): its items are claimed again, and its workers wake at
    once (``work_available`` names the lane when this commits). Returns the pause it ended, or
    None when it was not paused (nothing changes, nothing is audited). ``actor`` signs the
    audit entry (``queue.resumed``). Resuming a lane does not resume a kind paused on its own
    in it. Takes no tenant, as ``pause``."""
    lane, kind = _checked(lane, kind)
    rows: Rows = yield System(RESUME, ResumeParams(lane, kind, SITE_ORG_ID, actor, request_id))
    return _paused(rows.rows[0]) if rows.rows else None


@transition
def read_pauses() -> Plan[list[Paused]]:
    """Every pause in effect, by lane then kind. Takes no tenant: pauses are the site's."""
    rows: Rows = yield System(READ_PAUSES, NoParams())
    return [_paused(row) for row in rows.rows]
