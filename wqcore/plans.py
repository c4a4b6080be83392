"""Plans and their steps: what a transition is, whichever face runs it.

A plan is a generator that yields steps and receives each step's rows: ``Tenant(org_id,
statement, params)`` runs on the everyday login under that tenant (row-level security
applies), ``System(statement, params)`` on the system login (BYPASSRLS, for the named
tenant-less operations), ``TenantBatches`` many runs of one statement in one transaction,
``TenantChain`` a statement and those its rows call for after it, in one transaction. A
step's error is raised in the plan where it yielded the step, so a plan may handle it; what the
plan returns is what the transition returns.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from wqcore.conf import wq_settings
from wqcore.statements import Statement


class Rows(NamedTuple):
    """A statement's result: its column names and rows."""

    names: list[str]
    rows: list[tuple[Any, ...]]

    def column(self, index: int = 0) -> list[Any]:
        return [row[index] for row in self.rows]


@dataclass(frozen=True)
class Tenant:
    """Run ``statement`` on the everyday login, scoped to ``org_id``."""

    org_id: uuid.UUID
    statement: Statement
    params: NamedTuple


@dataclass(frozen=True)
class System:
    """Run ``statement`` on the system login, across tenants. With ``serialize`` (a mutex's
    name), it runs after taking that mutex in the same transaction: statements that name the
    same mutex run one at a time, and each sees what the one before it committed (it starts
    after the lock, so its snapshot does)."""

    statement: Statement
    params: NamedTuple
    serialize: str | None = None


@dataclass(frozen=True)
class TenantBatches:
    """Run ``statement`` once per ``params`` on the everyday login, scoped to ``org_id``, all
    in one transaction: each run is sent (psycopg's pipeline mode) before the next ``params``
    is made, so the caller's work on the next batch overlaps the server's on this one. If
    making one raises, nothing of any is kept. The step's rows are every run's, in order."""

    org_id: uuid.UUID
    statement: Statement
    params: Iterable[NamedTuple]


@dataclass(frozen=True)
class TenantChain:
    """Run ``statement`` on the everyday login, scoped to ``org_id``, then, in the same
    transaction, the statements ``then`` makes of its rows (none: the transaction ends with
    it); the step's rows are the first statement's. For a write one statement cannot make
    where the tables are distributed (Citus inserts the rows a CTE returned into another table
    by ``COPY``, which row-level security refuses): the settles' Citus forms."""

    org_id: uuid.UUID
    statement: Statement
    params: NamedTuple
    then: Callable[[Rows], Sequence[tuple[Statement, NamedTuple]]]


Step = Tenant | System | TenantBatches | TenantChain
# A plan that returns T: it yields steps, receives each one's rows, and returns its result.
type Plan[T] = Generator[Step, Rows, T]

# Take a mutex (workqueue.models.Mutex) until the transaction ends: make its row if it is new,
# then lock it. Only the system login may: the everyday login has no right on the table.
MUTEX_ROW = "INSERT INTO workqueue_mutex (name) VALUES (%(name)s) ON CONFLICT DO NOTHING"
MUTEX_LOCK = "SELECT FROM workqueue_mutex WHERE name = %(name)s FOR UPDATE"

# psycopg prepares a statement at its second run on a connection, and then only binds it.
PREPARE_THRESHOLD = 2


def prepares() -> bool:
    """Whether the store prepares its statements on the server, so each is planned once per
    connection. Not behind a transaction pooler (``WORKQUEUE["POOLER"]``): it runs each
    transaction on whichever server connection is free, where a statement prepared on another
    one does not exist (``prepared statement "_pg3_0" does not exist``), or another client's
    exists under the same name (``... already exists``)."""
    return wq_settings.POOLER != "transaction"


def drive[T](plan: Plan[T], execute: Callable[[Step], Rows], first: Step | None = None) -> T:
    """Drive ``plan`` with ``execute`` running each step; returns what the plan returns. A
    step's error is raised in the plan, where it yielded the step. ``first``: the step the plan
    already yielded (``begin``), when it was begun ahead."""
    try:
        step = next(plan) if first is None else first
        while True:
            try:
                rows = execute(step)
            except BaseException as exc:
                step = plan.throw(exc)
            else:
                step = plan.send(rows)
    except StopIteration as done:
        result: T = done.value  # what the plan returned
        return result


def begin[T](plan: Plan[T]) -> Step | Done[T]:
    """Run ``plan`` up to its first step, ahead of the moment that step is to run (``drive`` it
    from there with ``first``); or, when it needs none, what it returned."""
    try:
        return next(plan)
    except StopIteration as done:
        return Done(done.value)


@dataclass(frozen=True)
class Done[T]:
    """What a plan returned without a step (``begin``)."""

    value: T
