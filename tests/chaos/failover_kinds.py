"""The failover test's kind, run by real ``runworker`` subprocesses on a primary that dies.

A subprocess loads it through ``WORKER_HANDLER_MODULES=tests.chaos.failover_kinds``; the test
process imports it too, to enqueue it. ``FAILOVER_EFFECT`` advances one record per item
(``chaos_effect.version`` 0 -> 1, a compare-and-set, as ``CHAOS_EFFECT`` does: the chaos
suite's tables, ``tests/chaos/tables.py``), sleeping between the read and the write so the
primary dies while items are mid-handler.

What the database says after a failover is what the new primary kept, so every run is also
written, as it happens, to a journal outside it (``FAILOVER_JOURNAL``, one line per event,
appended by each worker process): ``start``, then ``applied`` (its compare-and-set committed),
``already`` (an earlier run had), ``refused`` (the record moved under it) or ``error``, then
``end``. An item with two ``applied`` lines had its effect committed twice; two runs of one
item whose ``start`` and ``end`` overlap ran at once.

The handler does not look at ``run.cancelled``: a run the worker fenced goes on, as a thread
that cannot be stopped does, and its write (on a connection checked first, so on the new
primary) meets the record's compare-and-set.
"""

from __future__ import annotations

import os
import time

import pydantic
from django.db import close_old_connections, connections

from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from workqueue.api import Kind, Payload, RetryPolicy, Run, WorkItem, handles, register

# Retries come quickly: the failover is the failure here, not the work.
FAST_RETRY = RetryPolicy(base_s=0.2, factor=2.0, cap_s=1.0)
JOURNAL_ENV = "FAILOVER_JOURNAL"


class FailoverPayload(Payload):
    n: int
    # Seconds between reading the record and writing it.
    sleep_s: float = pydantic.Field(default=0.0, ge=0, le=60)


FAILOVER = register(Kind("FAILOVER_EFFECT", FailoverPayload, max_attempts=50, retry=FAST_RETRY))


def journal(item: WorkItem, event: str) -> None:
    """One line, appended in one write: ``item attempt token pid event unix-time``."""
    line = f"{item.id} {item.attempts} {item.claim_token} {os.getpid()} {event} {time.time():.6f}\n"
    fd = os.open(os.environ[JOURNAL_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@handles(FAILOVER.name)
class JournalledEffect:
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
            time.sleep(item.payload.get("sleep_s", 0.0))
            if version > 0:
                outcome = "already"
                return
            # As a handler that waited a while should: its connection checked before the write
            # (Django's health check), so a run that outlived the crash writes to the new
            # primary, and meets the compare-and-set there.
            close_old_connections()
            with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
                cursor.execute(
                    "UPDATE chaos_effect SET version = version + 1, applied_attempt = %s,"
                    " applied_token = %s WHERE item_id = %s AND version = %s",
                    [item.attempts, item.claim_token, item.id, version],
                )
                changed = cursor.rowcount
            # Only once the scope has committed: a commit the server never acknowledged is an
            # error here, whatever became of it.
            outcome = "applied" if changed == 1 else "refused"
        finally:
            journal(item, outcome)
            journal(item, "end")
