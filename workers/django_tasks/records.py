"""Each task's record: written by the worker in shared statements, read back with its item.

The worker notes each attempt's start, and the error of each that failed (``record_start``,
``record_end``); many tasks run at once, so the notes of the tasks that reach the same point in
one pass of the event loop share one statement (as completions do), on the system login across
tenants. The claim token is the fence there, as in ``complete_many``: each row is written only
while the item is still held under the token of the claim that ran it, and no token matches
another tenant's row. What a task returned is not noted here: it is its item's result, written
by the statement that completes the item (``workqueue.api.result_of``). ``read_result`` reads
an item, its result and its record under the reader's tenant.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from tenancy.contexts import OpContext
from workers.django_tasks.kind import DJANGO_TASK
from workqueue import runtime
from wqcore.statements import Statement
from wqcore.store import Plan, System, Tenant, arun, run

logger = logging.getLogger(__name__)

SQL_DIR = Path(__file__).with_name("sql")
# The errors a record keeps (the latest): a task may have up to 1,000 attempts, and its record
# must stay a small row.
ERRORS_KEPT = 10
# The characters of a traceback kept (its end, where the error is).
TRACEBACK_CHARS = 4000


class RecordStartParams(NamedTuple):
    org_ids: list[uuid.UUID]
    ids: list[uuid.UUID]
    tokens: list[uuid.UUID]


class RecordEndParams(NamedTuple):
    org_ids: list[uuid.UUID]
    ids: list[uuid.UUID]
    tokens: list[uuid.UUID]
    # JSON text of each attempt's error ({"exception_class_path", "traceback"}).
    errors: list[str]
    keep: int


class ReadResultParams(NamedTuple):
    id: uuid.UUID
    kind: str


RECORD_START = Statement("record_start", RecordStartParams, SQL_DIR)
RECORD_END = Statement("record_end", RecordEndParams, SQL_DIR)
READ_RESULT = Statement("read_result", ReadResultParams, SQL_DIR)


@dataclass(frozen=True)
class Started:
    """A task's record as its attempt starts."""

    worker_ids: list[str]
    started_at: datetime
    last_attempted_at: datetime
    errors: list[dict[str, str]]


def error_json(exception_class_path: str, traceback: str) -> str:
    if len(traceback) > TRACEBACK_CHARS:
        traceback = "...\n" + traceback[-TRACEBACK_CHARS:]
    text = runtime.storable_text(traceback, TRACEBACK_CHARS + 4)
    return json.dumps({"exception_class_path": exception_class_path, "traceback": text})


def record_start_plan(fences: list[runtime.Fence]) -> Plan[dict[uuid.UUID, Started]]:
    params = RecordStartParams(
        [f.org_id for f in fences], [f.item_id for f in fences], [f.claim_token for f in fences]
    )
    rows = yield System(RECORD_START, params)
    return {
        item_id: Started(json.loads(workers), started_at, attempted_at, json.loads(errors))
        for item_id, workers, started_at, attempted_at, errors in rows.rows
    }


def record_end_plan(ends: list[tuple[runtime.Fence, str]]) -> Plan[set[uuid.UUID]]:
    """Append each failed attempt's error (``error_json``) to its record."""
    params = RecordEndParams(
        [f.org_id for f, _ in ends],
        [f.item_id for f, _ in ends],
        [f.claim_token for f, _ in ends],
        [error for _, error in ends],
        ERRORS_KEPT,
    )
    rows = yield System(RECORD_END, params)
    return set(rows.column(0))


class Recorder:
    """Writes the starts and the errors of the tasks running on one event loop, each kind of
    note in one statement per pass: the tasks that reach the same point while a statement is
    on its way join the next one, so nothing waits on a timer."""

    def __init__(self) -> None:
        self._starts: list[tuple[runtime.Fence, None, asyncio.Future[Started | None]]] = []
        self._ends: list[tuple[runtime.Fence, str, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def start(self, fence: runtime.Fence) -> Started | None:
        """Note that the attempt holding ``fence`` starts; the record as it now stands, or
        None when the item is no longer held under that token."""
        return await self._submit(self._starts, fence, None)

    async def failed(self, fence: runtime.Fence, error: str) -> bool:
        """Store the failed attempt's error (``error_json``); False when the item is no longer
        held under the token."""
        return await self._submit(self._ends, fence, error)

    async def _submit[D, T](
        self, queue: list[tuple[runtime.Fence, D, asyncio.Future[T]]], fence: runtime.Fence, data: D
    ) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        queue.append((fence, data, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="task-records")
        return await future

    async def _flush(self) -> None:
        while self._starts or self._ends:
            await asyncio.sleep(0)  # the tasks the same claim started join this statement
            starts, self._starts = self._starts, []
            ends, self._ends = self._ends, []
            if starts:
                started = record_start_plan([f for f, _, _ in starts])
                await self._write(starts, started, lambda written, item_id: written.get(item_id))
            if ends:
                ended = record_end_plan([(f, e) for f, e, _ in ends])
                await self._write(ends, ended, lambda written, item_id: item_id in written)

    @staticmethod
    async def _write[W, T](
        batch: list[tuple[runtime.Fence, Any, asyncio.Future[T]]],
        plan: Plan[W],
        answer: Callable[[W, uuid.UUID], T],
    ) -> None:
        """Run ``plan`` and settle each waiting task with ``answer(what it wrote, its id)``;
        a failed statement fails every waiting task (the worker's failure path takes it)."""
        try:
            written = await arun(plan)
            for fence, _, future in batch:
                if not future.done():  # done: its task was cancelled meanwhile
                    future.set_result(answer(written, fence.item_id))
        except Exception as exc:  # no waiting task is ever left hanging
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)


_RECORDERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Recorder] = (
    weakref.WeakKeyDictionary()
)


def recorder() -> Recorder:
    """The running event loop's recorder (a worker's loop; made on first use)."""
    loop = asyncio.get_running_loop()
    found = _RECORDERS.get(loop)
    if found is None:
        found = _RECORDERS[loop] = Recorder()
    return found


@dataclass(frozen=True)
class Stored:
    """A task's item and record as the tenant reads them."""

    status: str
    payload: dict[str, Any]
    priority: int
    lane: str
    available_at: datetime
    last_error: str
    claimed_by: str | None
    created_at: datetime
    updated_at: datetime
    worker_ids: list[str]
    started_at: datetime | None
    last_attempted_at: datetime | None
    # JSON text of the return value: the item's result (None: none stored).
    return_value: str | None
    errors: list[dict[str, str]]


def read_plan(ctx: OpContext, item_id: uuid.UUID) -> Plan[Stored | None]:
    rows = yield Tenant(ctx.org_id, READ_RESULT, ReadResultParams(item_id, DJANGO_TASK.name))
    if not rows.rows:
        return None
    values = dict(zip(rows.names, rows.rows[0], strict=True))
    values["payload"] = json.loads(values["payload"])
    values["worker_ids"] = json.loads(values["worker_ids"] or "[]")
    values["errors"] = json.loads(values["errors"] or "[]")
    return Stored(**values)


def read(ctx: OpContext, item_id: uuid.UUID) -> Stored | None:
    """The task item ``item_id`` and its record in the context's tenant, or None (no such
    task there: another tenant's, another kind's, or none)."""
    return run(read_plan(ctx, item_id))
