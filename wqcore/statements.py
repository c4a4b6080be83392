"""Statements: each named once, in its app's ``sql/<name>.sql`` with a line of intent, with
its parameters typed by a ``NamedTuple``.

A statement that locks rows takes its locking subquery from a Django queryset, compiled once
(``locking``): the card's ``select_for_update(skip_locked=True)`` is what picks the
rows, and the ``UPDATE ... FROM (that subquery) ... RETURNING`` around it keeps a claim batch
at one round trip. A statement that names its tenant itself takes ``{set_tenant}``, the one
spelling of the tenant setting (``wqcore.scope``); one that signs a write as the queue's own
takes ``{system_actor}`` (``wqcore.actor``).
"""

from __future__ import annotations

import re
import types
import typing
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import QuerySet

from wqcore.actor import SYSTEM_ACTOR
from wqcore.arrays import UUIDArray
from wqcore.conf import system_alias
from wqcore.scope import SET_TENANT_EXPR

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def load_sql(name: str, directory: Path) -> str:
    """The text of ``<directory>/<name>.sql``, its comment lines kept (they name it in logs)."""
    return (directory / f"{name}.sql").read_text().strip().rstrip(";")


class NoParams(NamedTuple):
    """The parameters of a statement that takes none."""


@dataclass(frozen=True)
class Locking:
    """A queryset's SQL with its parameters named (``slots``: sentinel value -> parameter
    field, for the values each run supplies) and the constants it was built with written in as
    literals."""

    sql: str


def sql_literal(value: Any) -> str:
    """A constant as an SQL literal (a compiled queryset's, or a value every row of an insert
    gets). Written in rather than bound: a prepared statement's generic plan must see
    ``status = 'pending'`` to use the partial indexes on pending rows (with a parameter there it
    scans the table)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str) and "\x00" not in value:
        return "'" + str(value).replace("'", "''") + "'"
    raise TypeError(f"cannot write {value!r} into a statement as a literal")


def locking(
    queryset: QuerySet[Any],
    slots: dict[Any, str],
    limit_slot: str,
    expressions: dict[Any, str] | None = None,
    limit_sql: str | None = None,
) -> Locking:
    """Compile ``queryset`` (a ``select_for_update(...)`` slice of ``values("id")``) into SQL
    whose parameters are named: each sentinel in ``slots`` becomes ``%(<field>)s``, each in
    ``expressions`` the SQL given for it (an earlier part of the statement), any other
    parameter a literal (``sql_literal``), and the slice's limit ``%(<limit_slot>)s`` (or
    ``limit_sql``)."""
    # Django compiles a locking queryset only inside a transaction; nothing runs in this one.
    alias = system_alias()
    with transaction.atomic(using=alias):
        text, params = queryset.query.get_compiler(using=alias).as_sql()
    pieces = text.split("%s")
    if len(pieces) != len(params) + 1:
        raise ValueError(f"cannot name the parameters of {text!r}")
    out = [pieces[0]]
    expressions = expressions or {}
    for value, rest in zip(params, pieces[1:], strict=True):
        if isinstance(value, Hashable) and value in expressions:
            out.append(f"{expressions[value]}{rest}")
            continue
        key = slots.get(value) if isinstance(value, Hashable) else None
        if key is None:
            out.append(f"{sql_literal(value)}{rest}")
            continue
        out.append(f"%({key})s{rest}")
    text = "".join(out)
    limit = queryset.query.high_mark
    limit_text = limit_sql if limit_sql is not None else f"%({limit_slot})s"
    text, found = re.subn(rf"\bLIMIT {limit}\b", f"LIMIT {limit_text}", text)
    if found != 1:
        raise ValueError(f"cannot find the limit in {text!r}")
    return Locking(text)


# Every statement made in this process, by ``<app folder>.<name>`` (``statements()``).
_STATEMENTS: dict[str, Statement] = {}


def statements() -> dict[str, Statement]:
    """Every statement the modules imported so far made, by ``<app folder>.<name>`` (e.g.
    ``workqueue.claim``), for ``manage.py statements`` to print them whole (only those whose
    file is there: a test may make one of a file it never wrote)."""
    return {
        key: statement
        for key, statement in sorted(_STATEMENTS.items())
        if (statement.directory / f"{statement.name}.sql").is_file()
    }


# Sent before a ``generic_plan`` statement in the same implicit transaction (one pipeline, one
# Sync), so the setting ends with it: the statement is bound, and its plan chosen, after this.
GENERIC_PLAN = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"


@dataclass(frozen=True)
class Statement:
    """One named statement. ``params`` is its NamedTuple of parameters; ``names_tenant`` says
    it sets the tenant for its own transaction (``{set_tenant}``), so it may run bare where
    that setting ends with it (``wqcore.scope.may_name_tenant_itself``)."""

    name: str
    params: type[NamedTuple]
    # Where ``<name>.sql`` lives: the sql/ folder of the app that owns the statement.
    directory: Path = field(compare=False)
    names_tenant: bool = False
    # Builds the locking subqueries, each replacing ``{<its name>}`` (compiled on first use:
    # Django compiles a locking queryset only on a connection, inside a transaction).
    build_locking: Callable[[], dict[str, Locking]] | None = field(default=None, compare=False)
    # Statements whose text this one embeds where it says ``{<their name>}`` (each still named
    # once, in its own app).
    includes: tuple[Statement, ...] = field(default=(), compare=False)
    # Builds parts that depend on the site's settings, each replacing ``{<its name>}`` (the
    # tenancy's lookup of what a claimed row's context needs): SQL text with this statement's
    # parameters only, compiled on first use.
    build_parts: Callable[[], dict[str, str]] | None = field(default=None, compare=False)
    # Run with its prepared statement's generic plan, always (``GENERIC_PLAN``, sent before it
    # in the same round trip). For a statement whose generic plan is right at every size but
    # whose estimate grows with the table: PostgreSQL's own choice then plans it afresh on
    # every run (over a million waiting items, planning the claim cost more than running it).
    generic_plan: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        _STATEMENTS.setdefault(f"{self.directory.parent.name}.{self.name}", self)

    @cached_property
    def lockings(self) -> dict[str, Locking]:
        return self.build_locking() if self.build_locking is not None else {}

    @cached_property
    def sql(self) -> str:
        text = (
            load_sql(self.name, self.directory)
            .replace("{set_tenant}", SET_TENANT_EXPR)
            .replace("{system_actor}", sql_literal(SYSTEM_ACTOR))
        )
        for name, part in self.lockings.items():
            text = text.replace("{" + name + "}", part.sql)
        for name, sql in (self.build_parts() if self.build_parts else {}).items():
            text = text.replace("{" + name + "}", sql)
        for included in self.includes:
            text = text.replace("{" + included.name + "}", included.sql)
        wanted = set(_PLACEHOLDER.findall(text))
        given = set(self.params._fields)
        if wanted != given:
            raise TypeError(
                f"statement {self.name}: the SQL names {sorted(wanted)}, "
                f"the parameters are {sorted(given)}"
            )
        return text

    @cached_property
    def native_sql(self) -> str:
        """``sql`` with PostgreSQL's own placeholders (``$1``, ``$2``… in the order of the
        parameters' fields; a name used twice is one placeholder). Both faces send it on a raw
        cursor, so the driver never parses the text: psycopg caches its parse of a text only
        up to 4 kB, and the claim is larger, so each claim was parsed again."""
        order = {name: n for n, name in enumerate(self.params._fields, start=1)}
        text = _PLACEHOLDER.sub(lambda m: f"${order[m.group(1)]}", self.sql)
        return text.replace("%%", "%")

    @cached_property
    def uuid_lists(self) -> tuple[int, ...]:
        """Where the parameters typed ``list[uuid.UUID]`` sit: sent as binary ``uuid[]``
        (``wqcore.arrays``), not element by element in text."""
        hints = typing.get_type_hints(self.params)
        return tuple(
            i for i, name in enumerate(self.params._fields) if _is_uuid_list(hints.get(name))
        )

    def bind_native(self, params: NamedTuple) -> tuple[Any, ...]:
        """The values ``native_sql``'s placeholders take, in order."""
        if type(params) is not self.params:
            raise TypeError(f"statement {self.name} takes {self.params.__name__}")
        if not self.uuid_lists:
            return tuple(params)
        values = list(params)
        for i in self.uuid_lists:
            if values[i] is not None:
                values[i] = UUIDArray(values[i])
        return tuple(values)


def _is_uuid_list(hint: Any) -> bool:
    if typing.get_origin(hint) not in (list, Sequence):
        return False
    (element,) = typing.get_args(hint) or (None,)
    return element is uuid.UUID or (
        typing.get_origin(element) in (typing.Union, types.UnionType)
        and set(typing.get_args(element)) == {uuid.UUID, type(None)}
    )
