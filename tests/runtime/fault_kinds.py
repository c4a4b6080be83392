"""The kinds the fault kit's tests run (``workers.testing.faults``): a receipt whose handler
enqueues one mail, its side effect, in one of four ways (``how``):

- ``keyed``: the mail's idempotency key is the receipt item's id, so a second run enqueues
  nothing (the documented way);
- ``unkeyed``: no key, so every run enqueues one more mail (broken: not safe to run again);
- ``strict``: keyed, but a run that finds its mail enqueued already fails (broken: a rerun
  after a crash can never succeed);
- ``marked``: no key, but the side effect is marked (``run.mark_side_effect()``), so a failure
  after it is a dead letter for a human, never a retry.

Imported by the held worker's process too (the kit imports a handler's own module there).
"""

from __future__ import annotations

from tenancy.contexts import OpContext
from workqueue import api

RECEIPT = "TEST_FAULT_RECEIPT"
RECEIPT_ASYNC = "TEST_FAULT_RECEIPT_ASYNC"
MAIL = "TEST_FAULT_MAIL"


class ReceiptPayload(api.Payload):
    order: int
    how: str = "keyed"


class MailPayload(api.Payload):
    order: int


api.register(api.Kind(RECEIPT, ReceiptPayload, max_attempts=3))
api.register(api.Kind(RECEIPT_ASYNC, ReceiptPayload, max_attempts=3))
api.register(api.Kind(MAIL, MailPayload))


def _key(item: api.WorkItem) -> str | None:
    return None if item.payload["how"] in ("unkeyed", "marked") else f"mail-{item.id}"


def _after(item: api.WorkItem, run: api.Run, outcome: api.Outcome) -> dict[str, str]:
    if item.payload["how"] == "strict" and outcome != api.Outcome.INSERTED:
        raise RuntimeError(f"the mail of order {item.payload['order']} was enqueued already")
    if item.payload["how"] == "marked":
        run.mark_side_effect()
    return {"mail": str(outcome)}


@api.handles(RECEIPT)
class Receipt:
    def handle(self, ctx: OpContext, item: api.WorkItem, run: api.Run) -> dict[str, str]:
        payload = {"order": item.payload["order"]}
        _, outcome = api.enqueue(ctx, MAIL, payload, lane="mail", idempotency_key=_key(item))
        return _after(item, run, outcome)


@api.handles(RECEIPT_ASYNC)
class ReceiptAsync:
    async def handle(self, ctx: OpContext, item: api.WorkItem, run: api.Run) -> dict[str, str]:
        payload = {"order": item.payload["order"]}
        _, outcome = await api.aenqueue(ctx, MAIL, payload, lane="mail", idempotency_key=_key(item))
        return _after(item, run, outcome)
