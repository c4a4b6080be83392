"""The items list's search: what an operator types in its box, read as terms, each a condition
the list can meet without walking the table, or else over a bounded scan that says so.

Terms, separated by spaces (quote one holding spaces: ``error:"connection refused"``):

- an item's id (exact), or any other bare word: an idempotency key (exact);
- ``kind:NAME`` (exact) or ``kind:PREFIX*`` (every kind beginning so); ``status:NAME``;
- ``payload.PATH=VALUE`` (``payload.order_id=42``, ``payload.customer.id=7``): the JSON value at
  that path, as text (``42`` matches the number and the string);
- ``error:TEXT``: text in the last error, any case;
- ``worker:ID``: the items that worker holds now;
- ``created>=WHEN``, ``created<WHEN``, ``finished>=WHEN``, ``finished<WHEN``: a moment as
  ``parse_since`` reads it (ISO 8601, a date, or a while ago: ``30m``, ``6h``, ``2d``).

What the indexes serve: the id and the key; ``created`` as a range of the time-ordered ids (the
primary key); ``finished`` through the indexes of ended items by when they ended; a payload
field through an index on that expression, where one exists on the item table and on every
history child (``read_payload_indexes``: a btree on ``payload ->> 'k'``, ``payload -> 'a' ->>
'b'`` or ``payload #>> '{a,b}'``, or a GIN index on the payload itself, searched by
containment). Error text, and a payload field with no index, are searched among the newest
``SCAN_MAX`` items only, with a warning and a link to search every item, which the operator
follows knowingly (``?scan=all``).
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from workqueue import SQL_DIR
from workqueue.exceptions import InvalidPayload
from workqueue.models import Status
from workqueue.triage import ERROR_CONTAINS_MAX, SCAN_MAX, parse_since
from wqcore.conf import system_alias
from wqcore.statements import NoParams, Statement
from wqcore.store import System, execute

READ_PAYLOAD_INDEXES = Statement("read_payload_indexes", NoParams, SQL_DIR)

# The statuses an item ends in, by the partial index that finds them by when they ended
# (workitem_finished_idx, workitem_triage_idx): a "finished" range reads each index once.
ENDED_BY_INDEX = (
    (Status.DONE.value, Status.FAILED.value),
    (Status.DISCARDED.value, Status.CANCELLED.value),
)
# A path's keys: plain names or array places (each is written into the SQL as a literal).
_KEY = re.compile(r"[A-Za-z0-9_-]{1,100}")
_PAYLOAD = re.compile(r"payload\.([^=]+)=(.*)", re.DOTALL)
_RANGE = re.compile(r"(created|finished)(>=|<)(.+)")
# The most terms one search takes.
TERMS_MAX = 10
# The most ids an indexed payload term gives a tenant's page (its count's cap and some).
IDS_READ = 10_001


@dataclass(frozen=True)
class PayloadTerm:
    path: tuple[str, ...]
    value: str

    @property
    def text(self) -> str:
        return f"payload.{'.'.join(self.path)}={self.value}"

    def arrow_sql(self) -> str:
        """``(payload -> 'a') ->> 'b'``: the expression of a btree index on the path."""
        sql = "payload"
        for key in self.path[:-1]:
            sql = f"({sql} -> '{key}')"
        return f"({sql} ->> '{self.path[-1]}')"

    def hash_sql(self) -> str:
        """``(payload #>> '{a,b}')``: the same, as one path."""
        return f"(payload #>> '{{{','.join(self.path)}}}')"

    def printed(self) -> dict[str, str]:
        """The index expressions PostgreSQL prints (``pg_get_indexdef``) that serve the path,
        each with the expression the search then writes (the index's own form)."""
        arrow = "payload"
        for key in self.path[:-1]:
            arrow = f"({arrow} -> '{key}'::text)"
        arrow = f"({arrow} ->> '{self.path[-1]}'::text)"
        return {arrow: self.arrow_sql(), f"{self.hash_sql()[:-1]}::text[])": self.hash_sql()}

    def contained(self) -> dict[str, Any]:
        """The path and value as a JSON object the payload contains (a GIN index's search): the
        value as JSON where it reads as JSON (42, true), else as a string."""
        try:
            value: Any = json.loads(self.value)
        except ValueError:
            value = self.value
        if isinstance(value, dict | list):
            value = self.value
        for key in reversed(self.path):
            value = {key: value}
        return value  # type: ignore[no-any-return]


@dataclass
class Terms:
    """A search read into its terms."""

    ids: list[uuid.UUID] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    kind_prefixes: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    payload: list[PayloadTerm] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)
    # (column, ">=" or "<", moment)
    ranges: list[tuple[str, str, datetime]] = field(default_factory=list)


def read_terms(text: str) -> Terms:
    """``text`` as its terms; ``InvalidPayload`` naming the term to change."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise InvalidPayload(f"search: {exc} (close the quote)") from None
    if len(words) > TERMS_MAX:
        raise InvalidPayload(f"search: at most {TERMS_MAX} terms, got {len(words)}")
    terms = Terms()
    for word in words:
        _read_term(word, terms)
    return terms


def _read_term(word: str, terms: Terms) -> None:
    if payload := _PAYLOAD.fullmatch(word):
        path = tuple(payload.group(1).split("."))
        if not all(_KEY.fullmatch(key) for key in path):
            raise InvalidPayload(
                f"search: {word[:60]!r}: a payload path is names of letters, digits, _ or -, "
                "joined by dots (payload.order_id=42)"
            )
        terms.payload.append(PayloadTerm(path, payload.group(2)[:200]))
    elif ranged := _RANGE.fullmatch(word):
        column, op, when = ranged.groups()
        terms.ranges.append((column, op, parse_since(when, column)))
    elif word.startswith("kind:") and len(word) > len("kind:"):
        name = word[len("kind:") :][:100]
        if name.endswith("*"):
            terms.kind_prefixes.append(name[:-1])
        else:
            terms.kinds.append(name)
    elif word.startswith("status:"):
        status = word[len("status:") :].lower()
        if status not in Status.values:
            raise InvalidPayload(f"search: status: must be one of {', '.join(Status.values)}")
        terms.statuses.append(status)
    elif word.startswith("error:") and len(word) > len("error:"):
        terms.errors.append(word[len("error:") :][:ERROR_CONTAINS_MAX])
    elif word.startswith("worker:") and len(word) > len("worker:"):
        terms.workers.append(word[len("worker:") :][:200])
    else:
        try:
            terms.ids.append(uuid.UUID(word))
        except ValueError:
            terms.keys.append(word[:200])


def ids_from(when: datetime) -> uuid.UUID:
    """The least time-ordered id (UUIDv7) minted at ``when``: ids at or past it were minted
    then or later (its first 48 bits are the Unix time in milliseconds)."""
    ms = max(int(when.timestamp() * 1000), 0)
    return uuid.UUID(int=ms << 80)


def payload_indexes() -> dict[str, list[tuple[str, str]]]:
    """Per table (the item table and each history child), the (expression, access method) of
    its indexes on the payload."""
    found: dict[str, list[tuple[str, str]]] = {}
    for table, expr, method in execute(System(READ_PAYLOAD_INDEXES, NoParams())).rows:
        found.setdefault(table, [])
        if expr is not None:
            found[table].append((expr, method))
    return found


def index_for(term: PayloadTerm, indexes: dict[str, list[tuple[str, str]]]) -> str | None:
    """The expression by which every table finds ``term`` through an index of its own: the
    path's (as the btree indexes print it), "gin" (containment), or None when some table has
    neither."""
    for printed, sql in term.printed().items():
        if all((printed, "btree") in kept for kept in indexes.values()):
            return sql
    if all(("payload", "gin") in kept for kept in indexes.values()):
        return "gin"
    return None


@dataclass
class Searched:
    """The list's rows for a search, and what the operator should know of how they were read."""

    queryset: QuerySet[Any]
    # Terms read through no index: searched among the newest SCAN_MAX only (or every item, with
    # the operator's consent).
    scanned: list[str] = field(default_factory=list)
    # Terms an index served.
    indexed: list[str] = field(default_factory=list)
    # How many of the newest items the scanned terms read (0: every item).
    newest: int = 0


def search(
    queryset: QuerySet[Any],
    terms: Terms,
    *,
    scan_all: bool = False,
    org_id: uuid.UUID | None = None,
) -> Searched:
    """The items matching every term, for every tenant (``org_id`` None: the operator, on the
    system login) or a tenant's staff (under row-level security). The terms no index serves are
    read among the table's newest ``SCAN_MAX`` items (by the primary key: ``newest_floor``),
    unless ``scan_all``."""
    found = Searched(queryset)
    q = found.queryset
    if terms.ids:
        q = q.filter(pk__in=terms.ids)
    for key in terms.keys:
        q = q.filter(idempotency_key=key)
    if terms.kinds:
        q = q.filter(kind__in=terms.kinds)
    if terms.statuses:
        q = q.filter(status__in=terms.statuses)
    for prefix in terms.kind_prefixes:
        q = q.filter(kind__startswith=prefix)
    for worker in terms.workers:
        q = q.filter(status=Status.CLAIMED, claimed_by=worker)
    for column, op, when in terms.ranges:
        q = _ranged(q, column, op, when)
    bounded = False
    indexes = payload_indexes() if terms.payload else {}
    for term in terms.payload:
        sql = index_for(term, indexes)
        if sql is None:
            bounded = True
            found.scanned.append(term.text)
            q = q.filter(_payload_is(term, term.arrow_sql()))
            continue
        found.indexed.append(term.text)
        if org_id is None:
            q = q.filter(_payload_is(term, sql))
            continue
        # Row-level security keeps the index out of a tenant's plan (its ->> is not leakproof,
        # so PostgreSQL applies the policy first, on every row): the tenant's matching ids are
        # read through the index on the system login, naming the tenant, and the rows
        # themselves under row-level security as every other row of the page.
        matching = queryset.model.objects.using(system_alias()).filter(org_id=org_id)
        ids = matching.filter(_payload_is(term, sql)).order_by("-id").values_list("id", flat=True)
        q = q.filter(pk__in=list(ids[:IDS_READ]))
    for text in terms.errors:
        q = q.filter(last_error__icontains=text)
        bounded = True
        found.scanned.append(f"error:{text}")
    if bounded and not scan_all:
        q = q.filter(id__gte=newest_floor())
        found.newest = SCAN_MAX
    found.queryset = q
    return found


def _payload_is(term: PayloadTerm, sql: str) -> Any:
    """The condition ``term`` holds, in the form ``sql`` (an expression, or "gin")."""
    if sql == "gin":
        return Q(payload__contains=term.contained())
    return RawSQL(f"{sql} = %s", (term.value,), output_field=BooleanField())


def newest_floor() -> uuid.UUID:
    """The id of the table's ``SCAN_MAX``-th newest item (the least id when it holds fewer):
    ``id >= floor`` is the newest ``SCAN_MAX`` items, which a bounded scan reads through the
    primary key. Read apart, on the system login, as an index-only walk of the key: an id,
    never shown, that bounds a tenant's staff by the table's newest items too (under row-level
    security, finding their tenant's ``SCAN_MAX``-th newest would walk every tenant's)."""
    from workqueue.models import WorkItem

    newest = WorkItem.objects.using(system_alias()).order_by("-id").values_list("id", flat=True)
    return next(iter(newest[SCAN_MAX - 1 : SCAN_MAX]), uuid.UUID(int=0))


def finished_since(q: QuerySet[Any], when: datetime, op: str = ">=") -> QuerySet[Any]:
    """The items that ended at or after ``when`` (before it, with ``op`` "<"), written as one
    arm per partial index of ended items, so each arm reads its index."""
    lookup = "updated_at__gte" if op == ">=" else "updated_at__lt"
    ended = Q()
    for statuses in ENDED_BY_INDEX:
        ended |= Q(status__in=statuses, **{lookup: when})
    return q.filter(ended)


def _ranged(q: QuerySet[Any], column: str, op: str, when: datetime) -> QuerySet[Any]:
    if column == "created":
        # The time-ordered ids: a range of the primary key (created_at says the same, exactly).
        if op == ">=":
            return q.filter(id__gte=ids_from(when), created_at__gte=when)
        return q.filter(id__lt=ids_from(when), created_at__lt=when)
    return finished_since(q, when, op)
