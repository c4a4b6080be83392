"""The vanished-host and disk-full tests' kind, run by real ``runworker`` subprocesses (on either
side of a cut, or on a full disk).

``CUT_EFFECT`` advances one record per item (``chaos_effect.version`` 0 -> 1, a compare-and-set,
the chaos suite's table) and journals each run as ``FAILOVER_EFFECT`` does
(``tests/chaos/failover_kinds.py``: ``start``, then ``applied``, ``already``, ``refused`` or
``error``, then ``end``). Its first attempt reads the record, then waits until the file named
by ``CUT_GATE`` exists (the test makes it once the cut host's network is back): a run that was
cut off mid-handler and never stopped, as a sync handler's thread goes on, writes only after
another worker has run the item again, and its write meets the compare-and-set. Later attempts
do not wait. A first attempt cancelled while it waits (its worker fenced itself) journals
``told`` when it sees so, and waits on.
"""

from __future__ import annotations

import os
import time

from django.db import close_old_connections, connections

from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from tests.chaos.failover_kinds import FAST_RETRY, FailoverPayload, journal
from workqueue.api import Kind, Run, WorkItem, handles, register

GATE_ENV = "CUT_GATE"
GATE_WAIT_S = 120.0
# The journal's event for a run the worker cancelled while it waited at the gate.
TOLD = "told"

CUT = register(Kind("CUT_EFFECT", FailoverPayload, max_attempts=50, retry=FAST_RETRY))


def _wait_for_gate(item: WorkItem, run: Run) -> None:
    """Wait for the gate; journal ``told`` when the worker cancels the run meanwhile (it fenced
    itself), and go on waiting, as a handler that does not stop."""
    gate = os.environ.get(GATE_ENV, "")
    deadline = time.monotonic() + GATE_WAIT_S
    told = False
    while gate and not os.path.exists(gate) and time.monotonic() < deadline:
        if run.cancelled and not told:
            journal(item, TOLD)
            told = True
        time.sleep(0.05)


@handles(CUT.name)
class GatedEffect:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        journal(item, "start")
        outcome = "error"
        try:
            with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
                cursor.execute(
                    "INSERT INTO chaos_effect (item_id, org_id, version) VALUES (%s, %s, 0)"
                    " ON CONFLICT DO NOTHING",
                    [item.id, ctx.org_id],
                )
                cursor.execute("SELECT version FROM chaos_effect WHERE item_id = %s", [item.id])
                (version,) = cursor.fetchone()
            if item.attempts == 1:
                _wait_for_gate(item, run)
            if version > 0:
                outcome = "already"
                return
            close_old_connections()  # the connection the cut ended is replaced, not reused
            with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
                cursor.execute(
                    "UPDATE chaos_effect SET version = version + 1, applied_attempt = %s,"
                    " applied_token = %s WHERE item_id = %s AND version = %s",
                    [item.attempts, item.claim_token, item.id, version],
                )
                changed = cursor.rowcount
            outcome = "applied" if changed == 1 else "refused"
        finally:
            journal(item, outcome)
            journal(item, "end")
