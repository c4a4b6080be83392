"""Kinds for the chaos suite, run by real ``runworker`` subprocesses.

A subprocess loads them through ``WORKER_HANDLER_MODULES=tests.chaos.kinds``; the test process
imports this module too, to enqueue them. Their tables (``chaos_effect``, ``chaos_run``) are
created by the test as the owner, with row-level security and grants like a product table
(``tests/chaos/tables.py``), and dropped after it: no product migration carries test tables.

- ``CHAOS_EFFECT`` advances one record per item (``chaos_effect.version`` 0 -> 1) with a
  compare-and-set, as a real handler advances the record its item is about (the
  claim token fences the queue row, the record's version fences the record). Some items sleep
  past the lease first, so a holder frozen or cut off meanwhile comes back stale.
- ``CHAOS_POISON`` kills its own process (``os._exit``) on every attempt: it must end as a dead
  letter after exactly ``max_attempts`` claims, however its workers die.

Every run of either handler is logged in ``chaos_run`` (durably, before a poison kills its
process), with the attempt number its claim spent: an attempt number seen twice for one item
would be a claim the database lost.
"""

from __future__ import annotations

import os
import time

import pydantic
from django.db import connections

from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from workqueue.api import Kind, Payload, RetryPolicy, Run, WorkItem, handles, register

# Retries come quickly: a connection cut by the test is the failure here, not the work.
FAST_RETRY = RetryPolicy(base_s=0.2, factor=2.0, cap_s=1.0)


class EffectPayload(Payload):
    n: int
    # Seconds to spend between reading the record and writing it (past the lease: the lease
    # keeper must hold the item meanwhile, or a frozen holder comes back stale).
    sleep_s: float = pydantic.Field(default=0.0, ge=0, le=60)


class PoisonPayload(Payload):
    n: int
    # Seconds to hold the claim before dying (the database is restarted meanwhile).
    sleep_s: float = pydantic.Field(default=0.0, ge=0, le=60)


# Generous attempts: every worker the test kills spends the attempt of each item it held.
EFFECT = register(Kind("CHAOS_EFFECT", EffectPayload, max_attempts=200, retry=FAST_RETRY))
POISON = register(Kind("CHAOS_POISON", PoisonPayload, max_attempts=3, retry=FAST_RETRY))

_LOG_RUN = """
INSERT INTO chaos_run (id, org_id, item_id, attempt, claim_token, pid, outcome, at)
VALUES (gen_random_uuid(), %s, %s, %s, %s, %s, %s, clock_timestamp())
"""


def _log_run(cursor: object, ctx: OpContext, item: WorkItem, outcome: str) -> None:
    cursor.execute(  # type: ignore[attr-defined]
        _LOG_RUN, [ctx.org_id, item.id, item.attempts, item.claim_token, os.getpid(), outcome]
    )


@handles(EFFECT.name)
class EffectHandler:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
            cursor.execute(
                "INSERT INTO chaos_effect (item_id, org_id, version) VALUES (%s, %s, 0)"
                " ON CONFLICT DO NOTHING",
                [item.id, ctx.org_id],
            )
            cursor.execute("SELECT version FROM chaos_effect WHERE item_id = %s", [item.id])
            (version,) = cursor.fetchone()
        deadline = time.monotonic() + item.payload.get("sleep_s", 0.0)
        while time.monotonic() < deadline:
            time.sleep(0.05)  # a stale holder's thread goes on: its write must be refused
        with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
            if version > 0:
                # An earlier attempt applied it (its worker died before completing): done.
                _log_run(cursor, ctx, item, "already")
                return
            cursor.execute(
                "UPDATE chaos_effect SET version = version + 1, applied_attempt = %s,"
                " applied_token = %s WHERE item_id = %s AND version = %s",
                [item.attempts, item.claim_token, item.id, version],
            )
            _log_run(cursor, ctx, item, "applied" if cursor.rowcount == 1 else "refused")


@handles(POISON.name)
class PoisonHandler:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        with tenant_scope(ctx.org_id), connections["default"].cursor() as cursor:
            _log_run(cursor, ctx, item, "poison")  # committed before the process dies
        time.sleep(item.payload.get("sleep_s", 0.0))
        os._exit(70)
