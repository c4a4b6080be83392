"""cancel_workflow: stop every step of a workflow that has not ended.

Its waiting and pending steps are cancelled at once, the reason kept as each one's last error;
its running ones get a cancel request, which each holder learns at its next lease renewal (as
``cancel`` does for one item: ``workqueue/cancel.py``). One statement, audited per step; the
steps that ended already are left as they are.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.cancel import CANCEL_SEEN
from workqueue.exceptions import NotFound
from workqueue.inputs import check_id, storable_text
from workqueue.models import Status
from workqueue.rows import items_of
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Tenant, transition

logger = logging.getLogger(__name__)

# The longest reason kept (it is each cancelled step's last error and in each audit entry).
REASON_MAX = 2000


class CancelWorkflowParams(NamedTuple):
    workflow_id: uuid.UUID
    reason: str
    # Who the audit entries name, and their request.
    actor: str
    request_id: uuid.UUID | None


class ReadWorkflowParams(NamedTuple):
    workflow_id: uuid.UUID


CANCEL_WORKFLOW = Statement(
    "cancel_workflow", CancelWorkflowParams, SQL_DIR, includes=(CANCEL_SEEN,)
)
READ_WORKFLOW = Statement("read_workflow", ReadWorkflowParams, SQL_DIR)


@dataclass(frozen=True)
class WorkflowCancelled:
    # Steps cancelled at once (waiting or pending), and running ones whose holders were asked.
    cancelled: int
    requested: int


@transition
def cancel_workflow(
    ctx: OpContext, workflow_id: Any, reason: str = "workflow cancelled"
) -> Plan[WorkflowCancelled]:
    """Cancel the context's tenant's workflow ``workflow_id``: every waiting or pending step at
    once (``cancelled``, with ``reason`` as its last error), every running one by a cancel
    request its holder learns at its next lease renewal; each with an audit entry naming
    ``ctx``'s user and the reason, in one statement. Steps already ended are left as they are
    (asking again changes nothing). ``NotFound`` when the tenant has no such workflow. Joins
    the caller's transaction."""
    wanted = check_id(workflow_id, "workflow_id")
    why = storable_text(str(reason))[:REASON_MAX]
    params = CancelWorkflowParams(wanted, why, ctx.user_id, ctx.request_id)
    moved = items_of((yield Tenant(ctx.org_id, CANCEL_WORKFLOW, params)))
    if not moved:
        # Nothing changed: a workflow whose steps all ended, or none (a second round trip only
        # on this path).
        first: Rows = yield Tenant(ctx.org_id, READ_WORKFLOW, ReadWorkflowParams(wanted))
        if not first.rows:
            raise NotFound(f"no workflow {wanted} in this tenant")
    result = WorkflowCancelled(
        cancelled=sum(1 for item in moved if item.status == Status.CANCELLED),
        requested=sum(1 for item in moved if item.status == Status.CLAIMED),
    )
    log_event(
        logger,
        logging.INFO,
        "workflow_cancel",
        org=ctx.org_id,
        actor=ctx.user_id,
        workflow=wanted,
        cancelled=result.cancelled,
        requested=result.requested,
    )
    return result


acancel_workflow = cancel_workflow.aio
