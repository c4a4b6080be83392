"""``manage.py queue cancel``: one item by id, whatever its tenant, and a bulk cancel of 10,000
items by kind that finishes, is resumable, and leaves one audit entry per item."""

from __future__ import annotations

import time
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from tests.helpers import row
from workqueue import api
from workqueue.models import Status, WorkItem


def _queue(*args: str) -> str:
    out = StringIO()
    call_command("queue", "cancel", *args, stdout=out)
    return out.getvalue()


def test_one_item_by_id_in_any_tenant_audited_with_the_actor(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    item, _ = api.enqueue(make_ctx(), "NOOP", {"n": 1})
    out = _queue(str(item.id), "--actor", "ops-alice")
    assert f"{item.id} cancelled" in out
    assert row(item.id).status == Status.CANCELLED
    [entry] = AuditEntry.objects.using("admin").filter(subject_id=str(item.id))
    assert (entry.action, entry.actor) == ("work.cancelled", "ops-alice")


def test_refusals_name_what_to_change(ctx) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError, match="not both"):
        _queue()
    with pytest.raises(CommandError, match="no work item"):
        _queue(str(uuid.uuid4()))
    with pytest.raises(CommandError, match="id:"):
        _queue("nope")
    with pytest.raises(CommandError, match="batch:"):
        _queue("--kind", "NOOP", "--batch", "0")
    with pytest.raises(CommandError, match="tenant:"):
        _queue("--kind", "NOOP", "--tenant", "acme")
    with pytest.raises(CommandError, match="go with --kind"):
        _queue(str(uuid.uuid4()), "--lane", "x")


def test_a_bulk_cancel_of_10000_by_kind_finishes_resumes_and_is_audited(ctx, make_ctx) -> None:  # type: ignore[no-untyped-def]
    other = make_ctx()
    for who in (ctx, other):
        for start in range(0, 5000, 1000):
            api.enqueue_many(
                who, [api.NewItem("NOOP", {"n": i}) for i in range(start, start + 1000)]
            )
    keep, _ = api.enqueue(ctx, "NOTIFY_SHIPMENT", {"shipment_id": str(uuid.uuid4()), "version": 1})
    # Stopped midway: what it did stays done.
    first = _queue("--kind", "NOOP", "--max-batches", "3", "--actor", "ops")
    assert "cancelled=3000" in first and "stopped early" in first
    started = time.perf_counter()
    rest = _queue("--kind", "NOOP", "--actor", "ops")
    took = time.perf_counter() - started
    assert "cancelled=7000" in rest and "finished" in rest, rest
    print(f"bulk cancel of 7,000 in {took:.2f} s ({7000 / took:,.0f} items/s)")
    assert WorkItem.objects.using("admin").filter(kind="NOOP", status="cancelled").count() == 10_000
    assert row(keep.id).status == Status.PENDING
    entries = AuditEntry.objects.using("admin").filter(action="work.cancelled")
    assert entries.count() == 10_000
    assert set(entries.values_list("actor", flat=True).distinct()) == {"ops"}
    # A tenant's only: nothing of another tenant, nothing left to do the second time.
    again = _queue("--kind", "NOOP", "--tenant", str(other.org_id))
    assert "cancelled=0" in again and "finished" in again
