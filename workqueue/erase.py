"""Erasing: every row a tenant left in the queue's tables deleted, its audit entries kept as a
skeleton (who, what, when) with their data redacted; or one person's data, the payload fields
their kinds declare personal (``Kind(..., personal=("email",))``), redacted wherever an
item's payload names them.

Which tables: every table of the product's apps with an ``org_id`` (a test walks the models
and fails on one that is not here): the items with what follows them, then each table
registered with ``register_tenant_table`` (the queue's own below; the outbox, the Django task
records and a site's own tables register theirs), the tenant's rate limits, and last the audit
trail, redacted through the one function that may (``audit/sql/schema/redact_v1.sql``). What
makes items goes first (the outbox's pending rows would be relayed into new ones).

On the system login: the everyday login may delete nothing from the queue's tables (nor reach
every tenant's rows in history), and the erase names its tenant in every statement instead of
relying on row-level security. Each batch is one short transaction of at most ``batch`` rows,
rows another transaction holds skipped (``SKIP LOCKED``): nothing waits for the erase, and it
waits for nothing. Its state is the rows left: stopped anywhere (a crash, ``kill -9``), running
it again goes on with what is left. Each run is audited under ``SITE_ORG_ID`` (the tenant's own
entries are the ones it redacts): ``queue.erase_started`` with the counts it found, table by
table, and ``queue.erase_finished`` with what it erased and what is left.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, cast

from audit.api import (
    APPEND_ENTRIES,
    COUNT_UNREDACTED,
    REDACT_ENTRIES,
    RedactParams,
    UnredactedParams,
)
from workqueue import SQL_DIR
from workqueue.exceptions import Conflict, InvalidPayload
from workqueue.kinds import Kind, all_kinds
from workqueue.pauses import SITE_ORG_ID
from wqcore.logs import log_event
from wqcore.statements import Statement
from wqcore.store import Plan, Rows, System, transition

logger = logging.getLogger(__name__)

BATCH_MAX = 10_000
PAUSE_MAX_S = 10.0
# What a personal field's value becomes in a redacted payload.
ERASED = "[erased]"
ITEMS = "workqueue_workitem"
AUDIT = "workqueue_audit_auditentry"
RATE_LIMITS = "workqueue_ratelimit"
_FIRST_ID = uuid.UUID(int=0)


class OrgParams(NamedTuple):
    org_id: uuid.UUID


class RowsParams(NamedTuple):
    org_id: uuid.UUID
    batch: int


class ItemsParams(NamedTuple):
    org_id: uuid.UUID
    # Where this batch starts: the last id the batch before it passed.
    after: uuid.UUID
    batch: int
    # Claimed items too (their holders' next write is refused: Conflict).
    force: bool


class SubjectParams(NamedTuple):
    kind: str
    field: str
    value: str
    org_id: uuid.UUID | None
    force: bool
    batch: int
    # The kind's personal fields, each set to ``mark`` (JSON).
    fields: list[str]
    mark: str


class SubjectCountParams(NamedTuple):
    kind: str
    field: str
    value: str
    org_id: uuid.UUID | None


class SubjectRowsParams(NamedTuple):
    kind: str
    field: str
    value: str
    org_id: uuid.UUID | None
    batch: int
    fields: list[str]
    mark: str


class SubjectRowsCountParams(NamedTuple):
    kind: str
    field: str
    value: str
    org_id: uuid.UUID | None


class EraseAuditParams(NamedTuple):
    site_org_id: uuid.UUID
    action: str
    subject_type: str
    subject_id: str
    data: str
    actor: str
    request_id: uuid.UUID | None


RUNNING = Statement("erase_running", OrgParams, SQL_DIR)
ERASE_ITEMS = Statement("erase_items", ItemsParams, SQL_DIR)
COUNT_RATE_LIMITS = Statement("erase_count_rate_limits", OrgParams, SQL_DIR)
ERASE_RATE_LIMITS = Statement("erase_rate_limits", OrgParams, SQL_DIR)
ERASE_SUBJECT = Statement("erase_subject", SubjectParams, SQL_DIR)
COUNT_SUBJECT = Statement("erase_subject_count", SubjectCountParams, SQL_DIR)
ERASE_AUDIT = Statement("erase_audit", EraseAuditParams, SQL_DIR, includes=(APPEND_ENTRIES,))


@dataclass(frozen=True)
class TenantTable:
    """A table whose rows of a tenant the erase deletes, by ``org_id``, picked by ``key`` (the
    columns that name one row; reached with its history children)."""

    table: str
    key: tuple[str, ...]
    # Erased before the items: it makes items (the outbox's pending rows).
    before_items: bool = False
    # Its rows carry items' payloads, of kind ``<kind_prefix><KIND>`` (the outbox's ``work.``):
    # a subject's erase redacts them as it does the items'.
    kind_prefix: str | None = None

    # Its count and its batch's delete: the two statements every table shares, its name and
    # key written in (made with the table, so ``manage.py statements`` prints the first one's).
    count_statement: Statement = field(init=False, compare=False, repr=False)
    erase_statement: Statement = field(init=False, compare=False, repr=False)
    # A subject's redaction and count: only for a table that carries payloads.
    subject_statement: Statement | None = field(init=False, compare=False, repr=False)
    subject_count_statement: Statement | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        parts = {
            "table": self.table,
            "key": ", ".join(self.key),
            "match": " AND ".join(f"t.{k} = doomed.{k}" for k in self.key),
        }
        count = Statement("erase_count", OrgParams, SQL_DIR, build_parts=lambda: parts)
        erase = Statement("erase_rows", RowsParams, SQL_DIR, build_parts=lambda: parts)
        object.__setattr__(self, "count_statement", count)
        object.__setattr__(self, "erase_statement", erase)
        subject = subject_count = None
        if self.kind_prefix is not None:
            subject = Statement(
                "erase_subject_rows", SubjectRowsParams, SQL_DIR, build_parts=lambda: parts
            )
            subject_count = Statement(
                "erase_subject_rows_count",
                SubjectRowsCountParams,
                SQL_DIR,
                build_parts=lambda: parts,
            )
        object.__setattr__(self, "subject_statement", subject)
        object.__setattr__(self, "subject_count_statement", subject_count)


_TABLES: dict[str, TenantTable] = {}


def register_tenant_table(
    table: str, key: tuple[str, ...], before_items: bool = False, kind_prefix: str | None = None
) -> None:
    """Have the erase delete a tenant's rows of ``table`` (an ``org_id`` column; ``key`` the
    columns naming a row), after the items (before them, ``before_items``: a table whose rows
    make items), in the order registered; with ``kind_prefix``, its rows carry items' payloads
    (``kind`` and ``payload`` columns, kind ``<kind_prefix><KIND>``), which a subject's erase
    redacts too. Called from an app's ``ready()``; again: no change."""
    if not table.isidentifier() or not key or not all(k.isidentifier() for k in key):
        raise ValueError(f"register_tenant_table: {table!r} {key!r} is no table and key")
    _TABLES.setdefault(table, TenantTable(table, tuple(key), before_items, kind_prefix))


@dataclass(frozen=True)
class _PayloadTable:
    table: str
    kind_prefix: str
    subject_statement: Statement
    subject_count_statement: Statement


def _payload_tables() -> list[_PayloadTable]:
    """The registered tables whose rows carry items' payloads, with their subject statements."""
    return [
        _PayloadTable(t.table, t.kind_prefix, t.subject_statement, t.subject_count_statement)
        for t in _TABLES.values()
        if t.kind_prefix is not None
        and t.subject_statement is not None
        and t.subject_count_statement is not None
    ]


def tenant_tables() -> list[str]:
    """Every table the erase reaches, in the order it erases them."""
    return [step.table for step in _steps()]


# What follows an item (deleted with it; these steps find what a purge or a crash left), and
# the queue's other tenant tables.
for _table, _key in (
    ("workqueue_attempt", ("id",)),
    ("workqueue_dependency", ("parent_id", "child_id")),
    ("workqueue_workflowstep", ("workflow_id", "item_id")),
    ("workqueue_ready", ("id", "slot")),
    ("workqueue_storedresponse", ("id",)),
    ("workqueue_laneminute", ("minute", "org_id", "lane")),
    ("workqueue_kindminute", ("minute", "org_id", "lane", "kind")),
    ("workqueue_tenantshare", ("org_id",)),
):
    register_tenant_table(_table, _key)


class _Step(Protocol):
    table: str

    def count(self, org_id: uuid.UUID) -> int: ...

    def erase(self, org_id: uuid.UUID, batch: int, force: bool) -> int | None:
        """Erase one batch; how many rows, or None when the step is done."""
        ...


@transition
def _one_number(statement: Statement, params: NamedTuple) -> Plan[int]:
    rows: Rows = yield System(statement, params)
    return int(rows.rows[0][0])


@transition
def _erase_items(params: ItemsParams) -> Plan[tuple[int, uuid.UUID | None]]:
    rows: Rows = yield System(ERASE_ITEMS, params)
    return int(rows.rows[0][0]), rows.rows[0][1]


class _Rows:
    def __init__(self, table: TenantTable) -> None:
        self.table, self.of = table.table, table

    def count(self, org_id: uuid.UUID) -> int:
        return _one_number(self.of.count_statement, OrgParams(org_id))

    def erase(self, org_id: uuid.UUID, batch: int, force: bool) -> int | None:
        return _one_number(self.of.erase_statement, RowsParams(org_id, batch)) or None


_ITEMS_TABLE = TenantTable(ITEMS, ("id",))


class _Items:
    table = ITEMS

    def __init__(self) -> None:
        self.after = _FIRST_ID

    def count(self, org_id: uuid.UUID) -> int:
        return _one_number(_ITEMS_TABLE.count_statement, OrgParams(org_id))

    def erase(self, org_id: uuid.UUID, batch: int, force: bool) -> int | None:
        n, last = _erase_items(ItemsParams(org_id, self.after, batch, force))
        if last is None:
            return None  # no item of the tenant after `after`: done
        self.after = last
        return n


class _RateLimits:
    table = RATE_LIMITS

    def __init__(self) -> None:
        self.done = False

    def count(self, org_id: uuid.UUID) -> int:
        return _one_number(COUNT_RATE_LIMITS, OrgParams(org_id))

    def erase(self, org_id: uuid.UUID, batch: int, force: bool) -> int | None:
        if self.done:
            return None
        self.done = True
        return _one_number(ERASE_RATE_LIMITS, OrgParams(org_id))


class _Audit:
    table = AUDIT

    def count(self, org_id: uuid.UUID) -> int:
        return _one_number(COUNT_UNREDACTED, UnredactedParams(org_id))

    def erase(self, org_id: uuid.UUID, batch: int, force: bool) -> int | None:
        return _one_number(REDACT_ENTRIES, RedactParams(org_id, None, None, batch)) or None


def _steps() -> list[_Step]:
    tables = list(_TABLES.values())
    return [
        *(_Rows(t) for t in tables if t.before_items),
        _Items(),
        *(_Rows(t) for t in tables if not t.before_items),
        _RateLimits(),
        _Audit(),
    ]


@dataclass(frozen=True)
class Erased:
    """What an erase found (``found``: rows per table when it began; for a subject, items per
    kind), what it erased (deleted, or redacted: the audit trail's and a subject's), and what is
    left (rows another transaction held, claimed items it was not forced to take)."""

    found: dict[str, int]
    erased: dict[str, int] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)
    # The items claimed when it began (a refused erase changes nothing).
    running: int = 0
    dry_run: bool = False

    @property
    def complete(self) -> bool:
        return not self.dry_run and not any(self.left.values())


def _check_batch(batch: int, pause_s: float) -> int:
    if type(batch) is not int or not 1 <= batch <= BATCH_MAX:
        raise InvalidPayload(f"batch: must be a whole number from 1 to {BATCH_MAX}, got {batch!r}")
    if not isinstance(cast(object, pause_s), int | float) or not 0 <= pause_s <= PAUSE_MAX_S:
        raise InvalidPayload(f"pause_s: must be 0 to {PAUSE_MAX_S} seconds, got {pause_s!r}")
    return batch


def _audit(actor: str, action: str, subject: tuple[str, str], data: dict[str, Any]) -> None:
    params = EraseAuditParams(
        SITE_ORG_ID, action, subject[0], subject[1], json.dumps(data), actor, None
    )
    _one_number(ERASE_AUDIT, params)


OnBatch = Callable[[str, int], None]


def erase_tenant(
    actor: str,
    org_id: uuid.UUID,
    *,
    force: bool = False,
    dry_run: bool = False,
    batch: int = 1000,
    pause_s: float = 0.0,
    on_batch: OnBatch | None = None,
) -> Erased:
    """Delete every row of ``org_id`` from the queue's tables and redact its audit entries'
    data, in batches of ``batch`` (one short transaction each, on the system login); returns
    what it found, erased and left. Refused (``Conflict``, nothing changed) while the tenant
    has claimed items, unless ``force`` (their holders' next writes are refused). ``dry_run``
    counts and changes nothing. Run outside a transaction: each batch commits on its own, so
    a crash keeps what was done and a second run goes on with the rest. ``on_batch(table,
    erased so far)`` after each batch; ``pause_s`` between batches leaves the server to other
    work (the erase's deletes take a core while they run)."""
    if not isinstance(cast(object, org_id), uuid.UUID) or org_id == SITE_ORG_ID:
        raise InvalidPayload(f"org_id: a tenant's id (a UUID), got {org_id!r}")
    batch = _check_batch(batch, pause_s)
    steps = _steps()
    found = {step.table: step.count(org_id) for step in steps}
    running = _one_number(RUNNING, OrgParams(org_id))
    if dry_run:
        return Erased(found, running=running, dry_run=True)
    if running and not force:
        raise Conflict(
            f"tenant {org_id} has {running} running (claimed) item(s): wait for them to end "
            "(pause its lanes, or stop its traffic), or force it (force=True, --force)"
        )
    subject = ("tenancy.org", str(org_id))
    _audit(actor, "queue.erase_started", subject, {"found": found, "force": force})
    erased: dict[str, int] = {}
    for step in steps:
        erased[step.table] = 0
        while (n := step.erase(org_id, batch, force)) is not None:
            erased[step.table] += n
            if on_batch is not None:
                on_batch(step.table, erased[step.table])
            time.sleep(pause_s)
    left = {step.table: step.count(org_id) for step in _steps()}
    _audit(actor, "queue.erase_finished", subject, {"erased": erased, "left": left})
    log_event(
        logger,
        logging.INFO,
        "tenant_erased",
        tenant=str(org_id),
        erased=sum(erased.values()),
        left=sum(left.values()),
    )
    return Erased(found, erased, left, running)


def personal_kinds(field_name: str) -> list[Kind]:
    """The kinds that declare ``field_name`` personal."""
    return [kind for kind in all_kinds() if field_name in kind.personal]


def erase_subject(
    actor: str,
    field_name: str,
    value: str,
    *,
    org_id: uuid.UUID | None = None,
    force: bool = False,
    dry_run: bool = False,
    batch: int = 1000,
    pause_s: float = 0.0,
    on_batch: OnBatch | None = None,
) -> Erased:
    """Redact the personal fields (each ``ERASED``) of every item whose kind declares
    ``field_name`` personal and whose payload's ``field_name`` is ``value``, in history too, of
    ``org_id`` or every tenant, the data of those items' audit entries, and the same payloads in
    the tables registered with a ``kind_prefix`` (the outbox's); counted per kind (and per kind
    and table).
    Refused (``Conflict``) while such an item is claimed, unless ``force``; ``InvalidPayload``
    when no kind declares the field personal. Batches as ``erase_tenant``'s; audited under
    ``SITE_ORG_ID`` with the field's name, never its value."""
    if org_id is not None and not isinstance(cast(object, org_id), uuid.UUID):
        raise InvalidPayload(f"org_id: a tenant's id (a UUID) or None, got {org_id!r}")
    kinds = personal_kinds(field_name)
    if not kinds:
        declared = sorted({f for kind in all_kinds() for f in kind.personal})
        raise InvalidPayload(
            f"subject: no kind declares {field_name!r} personal (Kind(..., personal=(...))); "
            f"declared: {', '.join(declared) or 'none'}"
        )
    if not isinstance(cast(object, value), str) or not value or "\x00" in value:
        raise InvalidPayload("subject: the value must be non-empty text")
    batch = _check_batch(batch, pause_s)
    counts = {
        kind.name: _count_subject(SubjectCountParams(kind.name, field_name, value, org_id))
        for kind in kinds
    }
    found = {name: total for name, (total, _) in counts.items()}
    found |= _count_subject_rows(kinds, field_name, value, org_id)
    running = sum(claimed for _, claimed in counts.values())
    if dry_run:
        return Erased(found, running=running, dry_run=True)
    if running and not force:
        raise Conflict(
            f"{running} item(s) naming the subject are running (claimed): wait for them to end, "
            "or force it (force=True, --force)"
        )
    subject = ("workqueue.subject", field_name)
    scope = {"field": field_name, "tenant": str(org_id) if org_id else None}
    _audit(actor, "queue.erase_started", subject, {**scope, "found": found, "force": force})
    erased: dict[str, int] = {}
    mark = json.dumps(ERASED)
    for kind in kinds:
        erased[kind.name] = 0
        params = SubjectParams(
            kind.name, field_name, value, org_id, force, batch, list(kind.personal), mark
        )
        while True:
            redacted = _redact_subject(params)
            for tenant, ids in redacted.items():
                _redact_entries(tenant, [str(i) for i in ids], batch)
            n = sum(len(ids) for ids in redacted.values())
            erased[kind.name] += n
            if on_batch is not None and n:
                on_batch(kind.name, erased[kind.name])
            time.sleep(pause_s)
            if n < batch:
                break  # a short batch: nothing more names the subject (or another holds it)
        for table in _payload_tables():
            name, prefixed = f"{kind.name} ({table.table})", f"{table.kind_prefix}{kind.name}"
            rows = SubjectRowsParams(
                prefixed, field_name, value, org_id, batch, list(kind.personal), mark
            )
            erased[name] = 0
            while n := _one_number(table.subject_statement, rows):
                erased[name] += n
                time.sleep(pause_s)
    left = {
        kind.name: _count_subject(SubjectCountParams(kind.name, field_name, value, org_id))[0]
        for kind in kinds
    }
    left |= _count_subject_rows(kinds, field_name, value, org_id)
    _audit(actor, "queue.erase_finished", subject, {**scope, "erased": erased, "left": left})
    return Erased(found, erased, left, running)


def _count_subject_rows(
    kinds: list[Kind], field_name: str, value: str, org_id: uuid.UUID | None
) -> dict[str, int]:
    """Per kind and table carrying payloads, how many rows name the subject."""
    return {
        f"{kind.name} ({table.table})": _one_number(
            table.subject_count_statement,
            SubjectRowsCountParams(f"{table.kind_prefix}{kind.name}", field_name, value, org_id),
        )
        for kind in kinds
        for table in _payload_tables()
    }


@transition
def _count_subject(params: SubjectCountParams) -> Plan[tuple[int, int]]:
    rows: Rows = yield System(COUNT_SUBJECT, params)
    return int(rows.rows[0][0]), int(rows.rows[0][1])


@transition
def _redact_subject(params: SubjectParams) -> Plan[dict[uuid.UUID, list[uuid.UUID]]]:
    """One batch of a subject's items redacted, by tenant."""
    rows: Rows = yield System(ERASE_SUBJECT, params)
    by_tenant: dict[uuid.UUID, list[uuid.UUID]] = {}
    for org, item_id in rows.rows:
        by_tenant.setdefault(org, []).append(item_id)
    return by_tenant


def _redact_entries(org_id: uuid.UUID, item_ids: list[str], batch: int) -> None:
    """The data of the audit entries of these items redacted (a dead letter's, a discard's
    keep the payload)."""
    params = RedactParams(org_id, "workqueue.workitem", item_ids, batch)
    while _one_number(REDACT_ENTRIES, params) == batch:
        pass


def erase(
    actor: str,
    org_id: uuid.UUID | None = None,
    *,
    subject: tuple[str, str] | None = None,
    force: bool = False,
    dry_run: bool = False,
    batch: int = 1000,
    pause_s: float = 0.0,
    on_batch: OnBatch | None = None,
) -> Erased:
    """Erase a tenant (``org_id``): every row of it deleted from the queue's tables, its
    audit entries' data redacted; or, with ``subject=(field, value)``, one person's data: the
    personal fields of the payloads that name them redacted (in ``org_id`` only, when given).
    The site's operator's (``actor`` signs the audit entries); see ``erase_tenant`` and
    ``erase_subject``."""
    if subject is not None:
        field_name, value = subject
        return erase_subject(
            actor,
            field_name,
            value,
            org_id=org_id,
            force=force,
            dry_run=dry_run,
            batch=batch,
            pause_s=pause_s,
            on_batch=on_batch,
        )
    if org_id is None:
        raise InvalidPayload("erase: name a tenant (org_id) or a subject (subject=(field, value))")
    return erase_tenant(
        actor,
        org_id,
        force=force,
        dry_run=dry_run,
        batch=batch,
        pause_s=pause_s,
        on_batch=on_batch,
    )
