"""The admin's workers page: every worker that has not gone offline, with its host, pid,
lane and kinds, its heartbeat's age, and what it holds now (each item linked to its page);
and the operator's drain or stop of one worker.

A worker's row (``workqueue_workers_worker``) is what it last published of itself (best
effort: ``liveness.py``); the items it holds are the claimed items naming it (read through
``workitem_stale_idx``, which holds claimed items only). Both belong to no tenant: the
operator's page, on the system login.

Both ask, neither kills: the row's state becomes ``draining`` or ``stopping``
(``sql/ask_worker.sql``, audited as ``worker.drain_requested`` or ``worker.stop_requested``
under the site's own tenant id), and the worker's next heartbeat reads it back. Drained, the
worker acts as at a first SIGTERM: it stops claiming, lets what it holds finish within its
grace period, and goes offline. Stopped, as at a second: it cancels what its handlers run,
releases each item (pending again, the attempt not counted) and goes offline; for a handler
stuck past its grace, or a deploy that must not wait. A worker that publishes no more (gone,
or cut off) learns nothing; its items go back by the rescue or the lease.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from django.utils import timezone

from audit.api import APPEND_ENTRIES
from workers.models import Worker, WorkerState
from workqueue import runtime
from wqcore.conf import system_alias
from wqcore.statements import Statement
from wqcore.store import System, execute

# The most workers the page lists (newest heartbeat first), and items it names per worker.
WORKERS_SHOWN = 200
HELD_SHOWN = 20


class AskParams(NamedTuple):
    worker_id: str
    # The state asked for, from which states, and the audit entry's action.
    state: str
    from_states: list[str]
    action: str
    site_org_id: uuid.UUID
    actor: str
    request_id: uuid.UUID | None
    # Where the operator asked from, for the audit entry.
    via: str


ASK_WORKER = Statement(
    "ask_worker",
    AskParams,
    directory=Path(__file__).with_name("sql"),
    includes=(APPEND_ENTRIES,),
)


@dataclass(frozen=True)
class Held:
    """One item a worker holds now."""

    id: uuid.UUID
    kind: str
    lane: str
    org_id: uuid.UUID
    claimed_at: datetime | None
    lease_expires_at: datetime | None


@dataclass
class WorkerView:
    worker: Worker
    beat_age_s: float
    # Beat longer ago than the page's ``silent_after_s``: its process may be gone.
    silent: bool
    holds: int = 0
    held: list[Held] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        return [k for k in self.worker.kind.split(",") if k]

    @property
    def drainable(self) -> bool:
        return self.worker.state == WorkerState.RUNNING

    @property
    def stoppable(self) -> bool:
        return self.worker.state in (WorkerState.RUNNING, WorkerState.DRAINING)


def read_fleet(silent_after_s: float) -> list[WorkerView]:
    """The workers not offline, newest heartbeat first, each with what it holds now (counted,
    and the first ``HELD_SHOWN`` by when they were claimed). Takes no tenant: workers serve
    every tenant (system login)."""
    alias = system_alias()
    now = timezone.now()
    live = Worker.objects.using(alias).exclude(state=WorkerState.OFFLINE)
    views = {}
    for worker in live.order_by("-last_beat_at")[:WORKERS_SHOWN]:
        beat_age = max((now - worker.last_beat_at).total_seconds(), 0.0)
        views[worker.id] = WorkerView(worker, beat_age, beat_age > silent_after_s)
    if not views:
        return []
    claimed = runtime.WorkItem.objects.using(alias).filter(
        status=runtime.Status.CLAIMED, claimed_by__in=list(views)
    )
    fields = ("id", "kind", "lane", "org_id", "claimed_at", "lease_expires_at", "claimed_by")
    for row in claimed.order_by("claimed_at", "id").values_list(*fields):
        view = views[row[-1]]
        view.holds += 1
        if len(view.held) < HELD_SHOWN:
            view.held.append(Held(*row[:-1]))
    return list(views.values())


def drain(worker_id: str, *, actor: str, request_id: uuid.UUID | None, via: str) -> bool:
    """Ask the running worker ``worker_id`` to drain, audited with ``actor``; False when it is
    not running (draining already, offline, or no such worker): nothing changes. Takes no
    tenant: a worker serves every tenant (system login); the caller checks the operator."""
    return _ask(
        worker_id,
        WorkerState.DRAINING,
        [WorkerState.RUNNING],
        "worker.drain_requested",
        actor=actor,
        request_id=request_id,
        via=via,
    )


def stop(worker_id: str, *, actor: str, request_id: uuid.UUID | None, via: str) -> bool:
    """Ask the worker ``worker_id``, running or draining, to stop now, audited with ``actor``;
    False when it is neither (stopping already, offline, or no such worker): nothing changes.
    Takes no tenant (system login); the caller checks the operator."""
    return _ask(
        worker_id,
        WorkerState.STOPPING,
        [WorkerState.RUNNING, WorkerState.DRAINING],
        "worker.stop_requested",
        actor=actor,
        request_id=request_id,
        via=via,
    )


def _ask(
    worker_id: str,
    state: str,
    from_states: list[WorkerState],
    action: str,
    *,
    actor: str,
    request_id: uuid.UUID | None,
    via: str,
) -> bool:
    """Set ``worker_id``'s state to ``state`` if it is in ``from_states``, audited as ``action``;
    whether it changed."""
    params = AskParams(
        worker_id[:200],
        str(state),
        [str(s) for s in from_states],
        action,
        runtime.SITE_ORG_ID,
        actor,
        request_id,
        via,
    )
    return bool(execute(System(ASK_WORKER, params)).rows)
