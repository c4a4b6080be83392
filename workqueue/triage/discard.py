"""Discard dead letters (or pending items) as the operator drew them: set aside, never run."""

from __future__ import annotations

from collections.abc import Sequence

from audit.api import APPEND_ENTRIES
from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.dependents import RELEASE_ENDED
from workqueue.ready import FORGET_READY
from workqueue.triage.drawn import (
    DISCARDABLE,
    Drawn,
    Triaged,
    TriageParams,
    checked_fences,
    log_triaged,
    result_of,
)
from wqcore.statements import Statement
from wqcore.store import Plan, Tenant, transition

DISCARD = Statement(
    "discard", TriageParams, SQL_DIR, includes=(APPEND_ENTRIES, RELEASE_ENDED, FORGET_READY)
)


@transition
def discard(ctx: OpContext, drawn: Sequence[Drawn]) -> Plan[Triaged]:
    """Set the context's tenant's dead letters (or pending items) aside as ``discarded``: never
    run, purged later. Each one's ``work.discarded`` audit entry keeps its payload, error and
    attempts and names ``ctx``'s user. Only items still as drawn change; the rest come back in
    ``refused``. Joins the caller's transaction."""
    fences = checked_fences(drawn, DISCARDABLE, "discard")
    result = result_of(fences, (yield Tenant(ctx.org_id, DISCARD, TriageParams.of(ctx, fences))))
    log_triaged("work_discarded", ctx, result)
    return result
