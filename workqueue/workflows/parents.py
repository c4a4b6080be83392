"""What a step learns of the items it waited for (its parents): a group's callback reads how its
members ended, counted, and each of them with its result, page by page; a chain's step reads
what the steps before it returned (``parent_results``).

Each page is one statement that reads the step's edges from the edge index in parent order, so
a callback of a group of any size reads it in bounded pieces.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from tenancy.contexts import OpContext
from workqueue import SQL_DIR
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import check_id
from workqueue.results import READ_MAX
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, Tenant, transition

# The most parents one page holds.
PAGE_MAX = 10_000
# Before every id: the first page starts after it.
_FIRST = uuid.UUID(int=0)


class ReadParentsParams(NamedTuple):
    child_id: uuid.UUID
    after: uuid.UUID
    limit: int


class CountParentsParams(NamedTuple):
    child_id: uuid.UUID


READ_PARENTS = Statement("read_parents", ReadParentsParams, SQL_DIR)
COUNT_PARENTS = Statement("count_parents", CountParentsParams, SQL_DIR)


class Parent(NamedTuple):
    """An item a step waits for, as it is now, and its edge."""

    id: uuid.UUID
    kind: str
    status: str
    # What the step needs of it ("done" or "finished"), and whether that came true.
    needs: str
    met: bool
    # What its handler returned (JSON), or None: not done (yet), or it returned None.
    result: Any


@dataclass(frozen=True)
class ParentsPage:
    parents: list[Parent]
    # Pass as ``after`` for the next page; None: this page was the last.
    next_after: uuid.UUID | None


def _check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE_MAX:
        raise InvalidPayload(f"limit: must be a whole number from 1 to {PAGE_MAX}")
    return limit


@transition
def read_parents(
    ctx: OpContext, item_id: Any, *, after: Any = None, limit: int = 1000
) -> Plan[ParentsPage]:
    """A page of the items the context's tenant's item ``item_id`` waits for (a group's
    members, for its callback), in id order: those after ``after`` (the previous page's
    ``next_after``), at most ``limit``. One statement a page."""
    child = check_id(item_id, "item_id")
    start = _FIRST if after is None else check_id(after, "after")
    wanted = _check_limit(limit)
    rows: Rows = yield Tenant(ctx.org_id, READ_PARENTS, ReadParentsParams(child, start, wanted))
    parents = [
        Parent(parent_id, kind, status, needs, met, None if text is None else json.loads(text))
        for parent_id, kind, status, needs, met, text in rows.rows
    ]
    # A page shorter than asked for is the last.
    more = len(parents) == wanted
    return ParentsPage(parents, parents[-1].id if more else None)


@transition
def parent_results(ctx: OpContext, item_id: Any) -> Plan[dict[uuid.UUID, Any]]:
    """What each item the context's tenant's item ``item_id`` waits for returned, by id (None:
    not done, or it returned None), read in one statement: a handler's way to the results its
    step was handed (``parent_results(ctx, item.id)``, or ``await aparent_results(...)``). At
    most ``results.READ_MAX`` parents; a callback of a larger group reads its members' results
    page by page (``read_parents``: each ``Parent``'s ``result``)."""
    page = yield from read_parents.plan(ctx, item_id, limit=READ_MAX + 1)
    if len(page.parents) > READ_MAX:
        raise InvalidPayload(
            f"item_id: waits for more than {READ_MAX} items; read their results page by page "
            "with read_parents (each Parent's result)"
        )
    return {parent.id: parent.result for parent in page.parents}


@transition
def count_parents(ctx: OpContext, item_id: Any) -> Plan[dict[str, int]]:
    """How many of the items the context's tenant's item ``item_id`` waits for are in each
    status (a group's callback: its members done, failed, cancelled...); one statement."""
    child = check_id(item_id, "item_id")
    rows: Rows = yield Tenant(ctx.org_id, COUNT_PARENTS, CountParentsParams(child))
    return {status: int(n) for status, n in rows.rows}


aread_parents = read_parents.aio
aparent_results = parent_results.aio
acount_parents = count_parents.aio
