"""Django's task API on the queue, without a worker: enqueue, read back, refuse, isolate.

Through Django's public API (``@task``, ``.enqueue()``, ``.aenqueue()``, ``.get_result()``,
``result.refresh()``); the stored item is read as the owner only to show where things went.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import override_settings

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tenancy.exceptions import NoContext
from tests import tasks
from tests.helpers import queue_settings, statements
from workers.django_tasks import records
from workers.django_tasks.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    default_task_backend,
    task,
    task_enqueued,
)
from workers.django_tasks.models import TaskRecord
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.models import WorkItem
from workqueue.settle import complete_many
from wqcore.store import run


def _items() -> list[WorkItem]:
    return list(WorkItem.objects.using("admin").order_by("created_at"))


@pytest.fixture
def member(ctx: OpContext) -> Iterator[OpContext]:
    """The member's context named as the current one, as a view of theirs would have it."""
    with using_context(ctx):
        yield ctx


def test_enqueue_writes_a_work_item_and_returns_a_ready_result(member: OpContext) -> None:
    result = tasks.add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY and result.backend == "default"
    assert (result.args, result.kwargs) == ([2], {"b": 3})
    [item] = _items()
    assert str(item.id) == result.id and result.enqueued_at == item.created_at
    assert (item.kind, item.lane, item.priority, item.status) == (
        "DJANGO_TASK",
        "default",
        0,
        "pending",
    )
    assert item.payload == {
        "path": "tests.tasks.add",
        "args": [2],
        "kwargs": {"b": 3},
        "backend": "default",
    }
    assert (item.org_id, item.created_by, item.max_attempts) == (member.org_id, member.user_id, 5)


def test_the_result_reads_back_through_get_result_and_refresh(member: OpContext) -> None:
    result = tasks.add.enqueue(1, 2)
    again = tasks.add.get_result(result.id)
    assert (again.id, again.status, again.args, again.task.func) == (
        result.id,
        TaskResultStatus.READY,
        [1, 2],
        tasks.add.func,
    )
    assert again.worker_ids == [] and again.errors == [] and again.attempts == 0
    assert again.enqueued_at == result.enqueued_at and again.started_at is None
    with pytest.raises(ValueError, match="not finished"):
        again.return_value  # noqa: B018
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert default_task_backend.get_result(uuid.UUID(result.id)).id == result.id


def test_a_waiting_tasks_result_is_the_one_enqueue_returned(member: OpContext) -> None:
    # Found by Django's reference tests: get_result's task.run_after held the item's
    # available_at (the enqueue time) where the caller set none, so the two were not equal.
    result = tasks.add.enqueue(1, 2)
    read = tasks.add.get_result(result.id)
    assert read.task.run_after is None
    assert read == result
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    later = tasks.add.using(run_after=when).enqueue(3, 4)
    assert tasks.add.get_result(later.id) == later
    assert tasks.add.get_result(later.id).task.run_after == when


def test_queue_priority_and_run_after_become_the_items(member: OpContext) -> None:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    with override_settings(TASKS=_tasks(QUEUES=["default", "emails"])):
        result = tasks.add.using(queue_name="emails", priority=7, run_after=when).enqueue(1, 1)
        [item] = _items()
        assert (item.lane, item.priority, item.available_at) == ("emails", 7, when)
        read = tasks.add.get_result(result.id)
    assert (read.task.queue_name, read.task.priority, read.task.run_after) == ("emails", 7, when)


def test_aenqueue_and_aget_result(member: OpContext) -> None:
    async def go() -> tuple[Any, Any]:
        result = await tasks.async_add.aenqueue(1, 2)
        return result, await tasks.async_add.aget_result(result.id)

    result, read = asyncio.run(go())
    assert read.id == result.id and read.status == TaskResultStatus.READY
    assert [str(i.id) for i in _items()] == [result.id]


def test_a_rolled_back_transaction_takes_the_task_back(member: OpContext) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.add.enqueue(1, 2)
        raise RuntimeError("the view failed")
    assert _items() == []


def test_task_enqueued_fires_with_the_ready_result(member: OpContext) -> None:
    seen = []

    def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
        seen.append((sender.__name__, task_result.id, task_result.status))

    task_enqueued.connect(receiver)
    try:
        result = tasks.add.enqueue(1, 2)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [("WorkQueueBackend", result.id, TaskResultStatus.READY)]


def test_a_result_is_visible_to_its_tenant_only(ctx: OpContext, make_ctx) -> None:
    other = make_ctx()
    with using_context(ctx):
        mine = tasks.add.enqueue(1, 2)
    with using_context(other):
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(mine.id)
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(mine.id)
        theirs = tasks.add.enqueue(3, 4)
    with using_context(ctx):
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(theirs.id)
        assert tasks.add.get_result(mine.id).args == [1, 2]


@pytest.mark.parametrize(
    "crafted", ["not-a-uuid", "", "' OR 1=1 --", tasks.UNKNOWN_ID, 12345, None]
)
def test_an_unknown_or_crafted_id_does_not_exist(member: OpContext, crafted: Any) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(crafted)


def test_an_item_of_another_kind_is_not_a_task_result(member: OpContext) -> None:
    item, _ = api.enqueue(member, "NOOP", {})
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(str(item.id))


def test_without_a_tenant_nothing_is_enqueued_or_read(ctx: OpContext) -> None:
    with pytest.raises(NoContext, match=r"workqueue\.api\.tenant\(org_or_slug\)"):
        tasks.add.enqueue(1, 2)
    with pytest.raises(NoContext, match="reading a task result"):
        tasks.add.get_result(tasks.UNKNOWN_ID)
    assert _items() == []


# -- Django's validation, kept --------------------------------------------------------------------


def test_a_function_that_is_not_module_level_is_refused() -> None:
    def inner() -> None:
        pass

    with pytest.raises(InvalidTask, match="module level"):
        task(inner)


@pytest.mark.parametrize("priority", [101, -101, 1000, 1.5])
def test_a_priority_out_of_range_is_refused(priority: Any) -> None:
    with pytest.raises(InvalidTask, match="priority"):
        tasks.add.using(priority=priority)


def test_an_unknown_queue_is_refused() -> None:
    with pytest.raises(InvalidTask, match="Queue 'nope' is not valid"):
        tasks.add.using(queue_name="nope")


def test_a_naive_run_after_is_refused() -> None:
    with pytest.raises(InvalidTask, match="aware"):
        tasks.add.using(run_after=datetime.datetime(2030, 1, 1))


# -- and this queue's ---------------------------------------------------------------------------


def test_a_task_whose_path_leads_elsewhere_is_refused_at_enqueue(member: OpContext) -> None:
    with pytest.raises(InvalidTask, match=r"'tests.tasks._impl' leads to function, not this task"):
        tasks.renamed.enqueue()
    assert _items() == []


def test_a_task_defined_in_a_script_is_refused() -> None:
    def script_task() -> None:
        pass

    script_task.__module__, script_task.__qualname__ = "__main__", "script_task"
    with pytest.raises(InvalidTask, match="__main__"):
        task(script_task)


def test_a_queue_that_is_no_lane_name_is_refused() -> None:
    with override_settings(TASKS=_tasks(QUEUES=["default", "bad queue!"])):
        with pytest.raises(InvalidTask, match="queue_name: must be"):
            tasks.add.using(queue_name="bad queue!")


NOT_JSON = [
    ((object(),), {}, TypeError, r"args\[0\]: a object is not JSON"),
    ((datetime.date(2024, 1, 1),), {}, TypeError, r"args\[0\]: a date is not JSON"),
    (({1, 2},), {}, TypeError, r"args\[0\]: a set is not JSON"),
    ((1,), {"b": [1, {"deep": object()}]}, TypeError, r"kwargs\['b'\]\[1\]\['deep'\]"),
    (({(1, 2): 3},), {}, TypeError, r"args\[0\]: the key \(1, 2\) is a tuple"),
    ((math.nan,), {}, ValueError, r"args\[0\]: NaN and infinity cannot be stored"),
    ((1,), {"b": math.inf}, ValueError, r"kwargs\['b'\]: NaN and infinity"),
    (("a\x00b",), {}, ValueError, r"args\[0\]: must not contain a NUL"),
    ((b"\xff\xfe",), {}, ValueError, r"args\[0\]: bytes that are not UTF-8"),
    ((b"a\x00",), {}, ValueError, r"args\[0\]: must not contain a NUL"),
    (("\ud800",), {}, ValueError, r"args\[0\]: must be valid Unicode"),
    # A keyword's name is stored too (found by the bad-input suite: it was refused as the
    # payload's, naming no argument).
    ((1,), {"b\x00": 2}, ValueError, r"kwargs\['b\\x00'\]: must not contain a NUL"),
    ((1,), {"\udc80": 2}, ValueError, r"kwargs\['\\udc80'\]: must be valid Unicode"),
]


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), NOT_JSON)
def test_arguments_that_are_not_json_are_refused_naming_them(
    member: OpContext, args: tuple, kwargs: dict, error: type, match: str
) -> None:
    with statements("default", "system") as sent, pytest.raises(error, match=match):
        tasks.add.enqueue(*args, **kwargs)
    assert sent == [] and _items() == []


def test_arguments_nested_too_deep_are_refused(member: OpContext) -> None:
    deep: Any = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 62 levels deep"):
        tasks.add.enqueue(deep, 1)
    assert _items() == []


def test_arguments_too_large_are_refused(member: OpContext) -> None:
    with queue_settings(MAX_PAYLOAD_BYTES=1000):
        with pytest.raises(api.InvalidPayload, match="more than the 1000 allowed"):
            tasks.add.enqueue("x" * 2000, 1)
    assert _items() == []


def test_tuples_and_utf8_bytes_become_json_as_django_makes_them(member: OpContext) -> None:
    result = tasks.add.enqueue((1, 2), b=b"caf\xc3\xa9")
    assert (result.args, result.kwargs) == ([[1, 2]], {"b": "café"})
    assert tasks.add.get_result(result.id).args == [[1, 2]]


def test_keys_that_are_not_text_become_json_keys(member: OpContext) -> None:
    """Found by the bad-input suite: None and True were stored as "None" and "True"."""
    result = tasks.add.enqueue({None: 1, True: 2, 3: 3, 1.5: 4}, b={False: [None]})
    want = ([{"null": 1, "true": 2, "3": 3, "1.5": 4}], {"b": {"false": [None]}})
    assert (result.args, result.kwargs) == want
    [item] = _items()
    assert (item.payload["args"], item.payload["kwargs"]) == want


# -- the retry policy: OPTIONS, then the task's own ----------------------------------------------


def _tasks(**default: Any) -> dict[str, Any]:
    from django.conf import settings

    merged = {**settings.TASKS["default"], **default}
    return {"default": merged}


def test_the_policy_comes_from_options_and_the_task_overrides_it(member: OpContext) -> None:
    options = {"MAX_ATTEMPTS": "7", "RETRY_BASE_S": 0.5}
    with override_settings(TASKS=_tasks(OPTIONS=options)):
        plain = tasks.add.enqueue(1, 1)
        own = tasks.always_fails.enqueue("x")
    stored = {str(i.id): i for i in _items()}
    assert stored[plain.id].max_attempts == 7
    assert stored[plain.id].payload["retry"] == {
        "base_s": 0.5,
        "factor": 2.0,
        "cap_s": 3600.0,
        "jitter": 0.25,
    }
    # @retries(max_attempts=2, base_s=0.05, jitter=0): the rest from OPTIONS
    assert stored[own.id].max_attempts == 2
    assert stored[own.id].payload["retry"] == {
        "base_s": 0.05,
        "factor": 2.0,
        "cap_s": 3600.0,
        "jitter": 0.0,
    }


def test_a_task_on_the_kinds_policy_carries_none(member: OpContext) -> None:
    tasks.add.enqueue(1, 1)
    [item] = _items()
    assert "retry" not in item.payload and item.max_attempts == 5


def test_a_misconfigured_backend_refuses_to_enqueue_and_says_why(member: OpContext) -> None:
    with override_settings(TASKS=_tasks(OPTIONS={"MAX_ATTEMPT": 3, "RETRY_JITTER": 2})):
        with pytest.raises(Exception, match="did you mean 'MAX_ATTEMPTS'"):
            tasks.add.enqueue(1, 1)
    assert _items() == []


# -- the record goes with its item -------------------------------------------------------------


def test_the_record_is_written_only_under_the_claim_token_and_purged_with_its_item(
    member: OpContext, worker_rctx
) -> None:
    result = tasks.add.enqueue(1, 2)
    [(_, held)] = claim(worker_rctx, "default", ["DJANGO_TASK"], "w1", 30, 1)
    stale = runtime.Fence(held.org_id, held.id, uuid.uuid4())
    assert run(records.record_start_plan([stale])) == {}
    assert not TaskRecord.objects.using("admin").exists()
    started = run(records.record_start_plan([runtime.Fence.of(held)]))
    assert started[held.id].worker_ids == ["w1"]
    error = records.error_json("builtins.ValueError", "Traceback ...\nValueError: no")
    assert run(records.record_end_plan([(stale, error)])) == set()
    assert run(records.record_end_plan([(runtime.Fence.of(held), error)])) == {held.id}
    # The return value is the item's result, written with its completion under the token.
    assert complete_many([stale], ["4"]) == set()
    complete_many([runtime.Fence.of(held)], ["3"])
    done = tasks.add.get_result(result.id)
    assert (done.status, done.return_value, done.worker_ids) == (
        TaskResultStatus.SUCCESSFUL,
        3,
        ["w1"],
    )
    assert [e.exception_class_path for e in done.errors] == ["builtins.ValueError"]
    purged = runtime.purge_items(
        worker_rctx, before=datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    )
    assert purged == 1
    assert not TaskRecord.objects.using("admin").exists()
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


def test_the_everyday_login_cannot_write_records(member: OpContext, worker_rctx) -> None:
    from django.db.utils import DatabaseError

    from tenancy.scope import tenant_scope

    tasks.add.enqueue(1, 2)
    [(_, held)] = claim(worker_rctx, "default", ["DJANGO_TASK"], "w1", 30, 1)
    run(records.record_start_plan([runtime.Fence.of(held)]))
    for attack in (
        "UPDATE workqueue_tasks_taskrecord SET errors = '[]'",
        "DELETE FROM workqueue_tasks_taskrecord",
        (
            "INSERT INTO workqueue_tasks_taskrecord (item_id, org_id, worker_ids, errors) "
            f"VALUES (gen_random_uuid(), '{member.org_id}', '[]', '[]')"
        ),
    ):
        with pytest.raises(DatabaseError), tenant_scope(member.org_id):
            with connections["default"].cursor() as cursor:
                cursor.execute(attack)


def test_a_return_value_jsonb_cannot_hold_is_refused_before_its_record_is_written() -> None:
    """UTF-8 bytes holding a NUL passed as text, bound for the record's jsonb, which refuses
    \\u0000 (found by the bad-input suite, for arguments)."""
    from workers.django_tasks.exceptions import InvalidReturnValue
    from workers.django_tasks.handler import stored_return

    for value in (b"a\x00", {"k": b"\x00"}, "a\x00"):
        with pytest.raises(InvalidReturnValue, match="NUL"):
            stored_return(value)
    assert stored_return({None: b"ok"}) == {"null": "ok"}
