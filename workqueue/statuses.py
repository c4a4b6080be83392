"""Where an item stands, read from Python in one object: its status, attempts, progress, its
result once done (``NOT_DONE`` before, so a handler's None is never mistaken for "not yet"),
and its last error. For a site that draws its own progress bar without its own HTTP call."""

from __future__ import annotations

import enum
import json
import uuid
from dataclasses import dataclass
from typing import Any

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.exceptions import NotFound
from workqueue.inputs import check_id
from workqueue.models import Status
from workqueue.results import ReadResultsParams
from wqcore.statements import Statement
from wqcore.store import Plan, Tenant, transition

READ_STATUSES = Statement("read_statuses", ReadResultsParams, SQL_DIR)


class _NotDone(enum.Enum):
    NOT_DONE = "not done yet"

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_DONE"


# An item's result before it is done: never equal to any value a handler can return.
NOT_DONE = _NotDone.NOT_DONE


@dataclass(frozen=True)
class ItemStatus:
    """One item as it stands. ``result`` is what its handler returned (None included) once
    ``done``, else ``NOT_DONE``; ``progress`` is its last report (``{"done", "total", "note",
    "at"}``) or None; ``last_error`` the last attempt's error ("" for none)."""

    id: uuid.UUID
    status: Status
    attempts: int
    max_attempts: int
    progress: dict[str, Any] | None
    result: Any
    last_error: str

    @property
    def done(self) -> bool:
        return self.status == Status.DONE

    @property
    def finished(self) -> bool:
        """It will not run again unless someone requeues it (done, failed, discarded,
        cancelled)."""
        return self.status not in (Status.WAITING, Status.PENDING, Status.CLAIMED)


@transition
def status_of(ctx: OpContext, item_id: uuid.UUID | str) -> Plan[ItemStatus]:
    """Where the item ``item_id`` of the context's tenant stands (``ItemStatus``), read in one
    statement. ``NotFound`` for an id of another tenant, as for one that never was."""
    wanted = check_id(item_id, "item_id")
    rows = yield Tenant(ctx.org_id, READ_STATUSES, ReadResultsParams(ctx.org_id, [wanted]))
    if not rows.rows:
        raise NotFound(f"no work item {wanted} in this tenant")
    [(found, status, attempts, max_attempts, progress, result, last_error)] = rows.rows
    status = Status(status)
    return ItemStatus(
        id=found,
        status=status,
        attempts=attempts,
        max_attempts=max_attempts,
        progress=None if progress is None else json.loads(progress),
        result=(None if result is None else json.loads(result))
        if status == Status.DONE
        else NOT_DONE,
        last_error=last_error,
    )


astatus_of = status_of.aio
