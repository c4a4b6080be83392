"""The work item's columns as an enqueue writes them, declared once.

``NewItem`` declares each column a caller gives: its Python type and default (the named
tuple's own), and, in its ``Given``, how the value is checked and how it is sent and stored.
``Author``, ``STARTS_AS`` and ``AT_INSERT`` say what the queue stamps in every other column,
whatever the caller sent. From these come the enqueue statements' column lists and values
(``sql/enqueue.sql``, ``sql/enqueue_many_rows.sql``), their parameters, the validated row
(``validated``), the bulk insert's arrays (``many_params``) and the item an insert returns
(``inserted_item``): a new column a caller gives is one line of ``NewItem`` (beside its model
field and migration).

This module has no ``from __future__ import annotations``: ``NewItem``'s annotations are read at
run time (``Annotated``'s ``Given``).
"""

import typing
import uuid
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from operator import itemgetter
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, cast

from tenancy.contexts import OpContext
from workqueue.exceptions import InvalidPayload
from workqueue.inputs import (
    KEY_MAX,
    check_id,
    check_lane,
    check_max_attempts,
    check_priority,
    check_text,
    check_traceparent,
    check_when,
)
from workqueue.kinds import Kind, get_kind, validate_payload
from workqueue.models import Status, WorkItem, new_item_id
from workqueue.rows import items_from_rows
from wqcore.arrays import (
    BinaryArray,
    BoolArray,
    IntArray,
    SmallIntArray,
    TextArray,
    TimestamptzArray,
    UUIDArray,
)
from wqcore.statements import sql_literal
from wqcore.tracing import current_traceparent


@dataclass(frozen=True)
class Given:
    """How a column the caller gives is checked, sent and stored."""

    # The column's PostgreSQL type: a single insert sends the value as it.
    sql_type: str
    # The list type a bulk insert sends the column's values in (one binary array per column).
    array: type[BinaryArray]
    # The value stored, from the item's kind and the caller's value (None when not given), or
    # ``InvalidPayload`` naming the field.
    check: Callable[[Kind, Any], Any]
    # What the server stores instead of NULL (SQL), if anything.
    if_null: str | None = None


def _kind_name(kind: Kind, value: Any) -> str:
    return kind.name


def _id_or_new(kind: Kind, value: Any) -> uuid.UUID:
    return new_item_id() if value is None else check_id(value)


def _key(field: str) -> Callable[[Kind, Any], str | None]:
    return lambda kind, value: None if value is None else check_text(field, value, KEY_MAX)


def _lane_or_kinds(kind: Kind, value: Any) -> str:
    return kind.lane if value is None else check_lane(value)


def _priority(kind: Kind, value: Any) -> int:
    return check_priority(value)


def _when(kind: Kind, value: Any) -> datetime | None:
    return check_when(value)


def _attempts_or_kinds(kind: Kind, value: Any) -> int:
    return kind.max_attempts if value is None else check_max_attempts(value)


class NewItem(NamedTuple):
    """One item to enqueue. The queue stamps status, attempts, author, and clears claim fields.

    A named tuple: bulk producers build thousands, and a frozen dataclass costs more to make.
    Each field: its type and default, then how it is stored (``Given``).
    """

    kind: Annotated[str, Given("text", TextArray, _kind_name)]
    # Checked against the kind's schema, stored as the JSON text the check wrote.
    payload: Annotated[dict[str, Any], Given("jsonb", TextArray, validate_payload)]
    # None: a new time-ordered id.
    id: Annotated[uuid.UUID | str | None, Given("uuid", UUIDArray, _id_or_new)] = None
    idempotency_key: Annotated[str | None, Given("text", TextArray, _key("idempotency_key"))] = None
    # None: the kind's lane.
    lane: Annotated[str | None, Given("text", TextArray, _lane_or_kinds)] = None
    priority: Annotated[int, Given("smallint", SmallIntArray, _priority)] = 0
    # None: the database's now().
    available_at: Annotated[
        datetime | None, Given("timestamptz", TimestamptzArray, _when, if_null="now()")
    ] = None
    # None: the kind's. A producer with its own policy (the django.tasks backend) names it.
    max_attempts: Annotated[int | None, Given("integer", IntArray, _attempts_or_kinds)] = None
    # At most one item of the tenant with this key runs at once; the others wait in order.
    concurrency_key: Annotated[str | None, Given("text", TextArray, _key("concurrency_key"))] = None
    # The key a rate limit of scope "key" counts it under (e.g. the remote account it calls).
    rate_key: Annotated[str | None, Given("text", TextArray, _key("rate_key"))] = None


GIVEN: dict[str, Given] = {
    name: hint.__metadata__[0]
    for name, hint in typing.get_type_hints(NewItem, include_extras=True).items()
}

if TYPE_CHECKING:
    Row = Any
else:
    # One validated item: NewItem's fields as the insert stores them (the id minted, the kind's
    # lane and attempts filled in, the payload as JSON text). Made from NewItem's fields, which
    # a type checker cannot read as a list, so to it a row is Any.
    Row = namedtuple("Row", NewItem._fields)

_CHECKS = tuple(given.check for given in GIVEN.values())
_LANE = NewItem._fields.index("lane")


def validated(new: object, where: str = "") -> Row:
    """The validated columns of one item, or ``InvalidPayload`` saying which field and why (or
    that a caller's ``new`` is no ``NewItem``)."""
    if not isinstance(new, NewItem):
        # The item itself is what is wrong: ``items[3]: must be ...``, not a field of it.
        where = where.rstrip(".") or "item"
        raise InvalidPayload(f"{where}: must be a NewItem, got {type(new).__name__}")
    try:
        kind = get_kind(new.kind)
        return Row._make([check(kind, value) for check, value in zip(_CHECKS, new, strict=True)])
    except InvalidPayload as exc:
        if not where:
            raise
        raise InvalidPayload(f"{where}{exc}") from None


# -- what the queue stamps, whatever the caller sent --------------------------------------------


class Author(NamedTuple):
    """Who an item is enqueued for and by whom (each field with the SQL type it is sent as)."""

    org_id: Annotated[uuid.UUID, "uuid"]
    created_by: Annotated[str, "text"]
    request_id: Annotated[uuid.UUID | None, "uuid"]
    traceparent: Annotated[str | None, "text"]

    @classmethod
    def of(cls, ctx: OpContext) -> "Author":
        return cls(
            ctx.org_id,
            ctx.user_id,
            ctx.caused_by_request_id or ctx.request_id,
            check_traceparent(ctx.rctx.traceparent or current_traceparent()),
        )


# The author's columns: Author's fields, and ``updated_by`` (nobody else has changed it yet).
AUTHORED = {name: name for name in Author._fields} | {"updated_by": "created_by"}
# What every item starts as: pending, no attempt spent, no error, no claim, no cancel request,
# in no workflow, waiting for nothing and waited for by nothing, no result (written by the
# statement that completes it: workqueue/results.py), no progress and no metadata (an empty
# object, as JSON text: each item read back gets a dict of its own).
STARTS_AS: dict[str, Any] = {
    "status": Status.PENDING.value,
    "attempts": 0,
    "last_error": "",
    "claimed_by": None,
    "claimed_at": None,
    "claim_token": None,
    "lease_expires_at": None,
    "cancel_requested_at": None,
    "workflow_id": None,
    "waiting_on": 0,
    "has_dependents": False,
    "result": None,
    "progress": None,
    "meta": "{}",
}
# What a workflow's insert gives each of its steps instead (workqueue/workflows), each sent as
# an array beside NewItem's columns: its edges (its status and unmet edges follow from them and
# its parents: the insert says how), whether it is a parent, and its workflow.
STEP_PLACED: dict[str, type[BinaryArray]] = {
    "waiting_on": IntArray,
    "has_dependents": BoolArray,
    "workflow_id": UUIDArray,
}
# Stamped with the insert's own moment (the server's now()); ringed_at too: the enqueue writes
# the pending item's ready row in the same statement (workqueue/models/ready.py).
AT_INSERT = ("ringed_at", "created_at", "updated_at")
# What the single insert returns (the rest is what it was sent): the id, which tells an insert
# from a conflict, when the item is due (its available_at may be the server's now()), and the
# insert's moment.
RETURNED = ("id", "available_at", "created_at")


def _sql(value: Any) -> str:
    return "NULL" if value is None else sql_literal(value)


def _author_sql(field: str) -> str:
    sql_type = typing.get_type_hints(Author, include_extras=True)[field].__metadata__[0]
    return f"%({field})s::{sql_type}"


def _given_sql(name: str, value: str) -> str:
    if_null = GIVEN[name].if_null
    return value if if_null is None else f"COALESCE({value}, {if_null})"


@cache
def insert_columns() -> tuple[str, ...]:
    """Every column of the work item, in the model's order; each must be given, stamped by the
    author, started as, or stamped at the insert (a new one must say which, here)."""
    # A cast Django keeps true: a field is concrete when it has a column.
    names = tuple(cast(str, field.column) for field in WorkItem._meta.concrete_fields)
    for name in names:
        if sum(name in group for group in (GIVEN, AUTHORED, STARTS_AS, AT_INSERT)) != 1:
            raise TypeError(
                f"workqueue_workitem.{name}: say once, in workqueue/columns.py, what an enqueue "
                "stores in it (a NewItem field, AUTHORED, STARTS_AS or AT_INSERT)"
            )
    return names


def _stamped_sql(name: str) -> str:
    if name in AUTHORED:
        return _author_sql(AUTHORED[name])
    return "now()" if name in AT_INSERT else _sql(STARTS_AS[name])


def one_insert_parts() -> dict[str, str]:
    """``sql/enqueue.sql``'s column list, values (one row, each given column a parameter) and
    what it returns."""
    values = [
        _given_sql(name, f"%({name})s::{GIVEN[name].sql_type}")
        if name in GIVEN
        else _stamped_sql(name)
        for name in insert_columns()
    ]
    return {
        "item_columns": ", ".join(insert_columns()),
        "item_values": ", ".join(values),
        "returned": ", ".join(RETURNED),
    }


def _element(name: str) -> str:
    """A given column's value in the bulk insert: its array's element, cast when the array's
    type is not the column's (the payload, sent as text)."""
    given = GIVEN[name]
    value = f"i.{name}"
    if given.array.sql_type != f"{given.sql_type}[]":
        value = f"{value}::{given.sql_type}"
    return _given_sql(name, value)


def _row_value(name: str, placed: dict[str, type[BinaryArray]], values: dict[str, str]) -> str:
    if name in values:
        return values[name]
    if name in GIVEN:
        return _element(name)
    return f"i.{name}" if name in placed else _stamped_sql(name)


def many_insert_parts(
    placed: dict[str, type[BinaryArray]] | None = None, values: dict[str, str] | None = None
) -> dict[str, str]:
    """``sql/enqueue_many_rows.sql``'s column list, values (a row per element of the given
    columns' arrays, unnested side by side as ``i``), the arrays and their names; with
    ``placed``, those columns too come from arrays of their own, not from ``STARTS_AS``; with
    ``values``, those columns take that SQL (the including statement's own)."""
    placed, values = placed or {}, values or {}
    arrays = [f"%({name})s::{given.array.sql_type}" for name, given in GIVEN.items()]
    arrays += [f"%({name})s::{array.sql_type}" for name, array in placed.items()]
    return {
        "item_columns": ", ".join(insert_columns()),
        "item_values": ", ".join(_row_value(name, placed, values) for name in insert_columns()),
        "item_arrays": ", ".join(arrays),
        "given_columns": ", ".join([*GIVEN, *placed]),
    }


# -- the parameters the statements take -------------------------------------------------------


def statement_params(name: str, fields: Sequence[str]) -> type[Any]:
    """A statement's parameters, a named tuple of ``fields`` (made from the declaration above,
    which a type checker cannot read as a list)."""
    return namedtuple(name, fields)


# One item's columns, then its author's.
EnqueueParams = statement_params("EnqueueParams", (*GIVEN, *Author._fields))
# Each given column as an array (element n of each is row n), then the author's columns.
EnqueueRowsParams = statement_params("EnqueueRowsParams", (*GIVEN, *Author._fields))
# The same, and the lane announced on work_available ("*" when the batch spans lanes).
EnqueueManyParams = statement_params("EnqueueManyParams", (*GIVEN, *Author._fields, "notice"))
# A workflow's steps: each given column as an array, each placed one too, then the author's.
STEP_ROW_FIELDS = (*GIVEN, *STEP_PLACED, *Author._fields)


def one_params(author: Author, row: Row) -> Any:
    return EnqueueParams(*row, *author)


def many_params(author: Author, rows: Sequence[Row]) -> Any:
    """The bulk insert's parameters for ``rows`` (at least one): each column as the binary
    array its ``Given`` names (wqcore.arrays), which the server reads without parsing a
    document."""
    arrays = many_arrays(rows)
    lanes = list(arrays[_LANE])
    notice = lanes[0] if lanes.count(lanes[0]) == len(lanes) else "*"
    return EnqueueManyParams(*arrays, *author, notice)


def many_arrays(rows: Sequence[Row]) -> list[BinaryArray]:
    """Each given column of ``rows`` (at least one) as the binary array its ``Given`` names
    (wqcore.arrays), in ``NewItem``'s order."""
    columns = list(zip(*rows, strict=True))
    return [given.array(values) for given, values in zip(GIVEN.values(), columns, strict=True)]


# -- the item an insert stored ------------------------------------------------------------------


@cache
def _item_values() -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """Picks an item's values, in the model's field order, out of (what the insert returned,
    the row, the author, what every item starts as)."""
    sources = [*RETURNED, *GIVEN, *Author._fields, *STARTS_AS]
    picks = []
    for name in insert_columns():
        if name in AT_INSERT:
            name = "created_at"  # the insert's now(), as returned
        # The first it finds: what the insert returned (the id, when it is due) comes before
        # what was sent.
        picks.append(sources.index(AUTHORED.get(name, name)))
    return itemgetter(*picks)


def inserted_item(author: Author, row: Row, returned: Sequence[Any]) -> WorkItem:
    """The item as the single insert stored it, from what the caller sent and what the server
    returned (``RETURNED``, not the whole row)."""
    values = _item_values()((*returned[: len(RETURNED)], *row, *author, *STARTS_AS.values()))
    return items_from_rows("default", insert_columns(), [values])[0]
