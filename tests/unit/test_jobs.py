"""The jobs a worker holds are told apart by claim, not by item: a worker frozen past its lease
may claim the same item again, under a new token, before its old claim's task has heard the
claim was lost. A report about the old claim must not reach the new one."""

from __future__ import annotations

import asyncio
import uuid

from tenancy.contexts import AppType, OpContext, new_request_context, service_context
from workers.jobs import RECLAIMED, Job, Jobs
from workers.lease import CONFLICT
from workqueue import runtime
from workqueue.models import WorkItem


def _claim(item_id: uuid.UUID, org_id: uuid.UUID) -> WorkItem:
    """The item as a claim returns it: a fresh token each time."""
    return WorkItem(id=item_id, org_id=org_id, kind="NOOP", payload={}, claim_token=uuid.uuid4())


def _ctx(org_id: uuid.UUID) -> OpContext:
    return service_context(new_request_context(AppType.WORKER), org_id)


def _reason(job: Job) -> str | None:
    """Read afresh each time (the loop sets it between the test's looks)."""
    return job.cancel_reason


def _told(job: Job) -> bool:
    """Whether its handler was told to stop (``run.cancelled``), read afresh."""
    return job.run.cancelled


async def _held_forever() -> None:
    await asyncio.sleep(3600)


def test_a_report_about_an_earlier_claim_leaves_the_newer_claim_of_the_item_running() -> None:
    async def scenario() -> None:
        jobs = Jobs()
        jobs.loop = asyncio.get_running_loop()
        item_id, org_id = uuid.uuid4(), uuid.uuid4()
        old = jobs.add(_ctx(org_id), _claim(item_id, org_id))
        old.task = asyncio.create_task(_held_forever())
        new = jobs.add(_ctx(org_id), _claim(item_id, org_id))
        new.task = asyncio.create_task(_held_forever())
        assert _reason(old) == RECLAIMED, "the old claim is gone: its task is cancelled"
        assert len(jobs) == 1

        # The lease keeper reports the old claim lost, and a cancel request for it: both late.
        jobs.lost_threadsafe(old.fence, CONFLICT)
        jobs.cancel_threadsafe(old.fence)
        await asyncio.sleep(0)
        assert _reason(new) is None and not _told(new)
        assert not new.task.cancelled()

        # The old task ends after the new claim was made: the new job keeps its entry.
        jobs.end(old)
        assert len(jobs) == 1 and jobs.running() == [new]

        # A report about the new claim reaches it.
        jobs.lost_threadsafe(new.fence, CONFLICT)
        await asyncio.sleep(0)
        assert _reason(new) == CONFLICT and _told(new)
        jobs.end(new)
        assert len(jobs) == 0
        await asyncio.gather(old.task, new.task, return_exceptions=True)

    asyncio.run(scenario())


def test_a_fence_names_the_claim() -> None:
    item_id, org_id = uuid.uuid4(), uuid.uuid4()
    first, second = _claim(item_id, org_id), _claim(item_id, org_id)
    assert runtime.Fence.of(first) != runtime.Fence.of(second)
