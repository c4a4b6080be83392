"""Dry-run a dead letter's requeue: run its handler once, inside a transaction that is always
rolled back, and say what the run would have done.

What the report holds (``DryRun``): whether the handler returned (and what) or raised (the
exception and its traceback); the rows it wrote, per table (inserted, updated, deleted: read
from PostgreSQL's own counters for the transaction, ``pg_stat_xact_user_tables``, before and
after the run, on each connection the queue uses, so statements with CTEs, triggers and
cascades count too); the outbox messages it emitted (``outbox.emit``); the items it enqueued
(``enqueue`` and its bulk twin, through ``work_enqueued``); the mail it sent through
``django.core.mail``. None of it is committed, and no mail leaves: during the run the site's
mail backend is replaced, for this thread only, by one that keeps the messages (as Django's
locmem backend does); other threads' mail goes out as before.

What cannot be intercepted: anything that leaves the process other than through the database
or ``django.core.mail`` (an HTTP call, a socket, a file, a message broker). A handler that
does such a thing must check ``run.dry_run`` and skip it (say what it would have done with
``run.set_meta``), or do it through the outbox, whose rows are rolled back with the rest.
Statements sent on connections of the handler's own (a second database, a psycopg connection
it opens, the store's async face) are outside the rolled-back transaction: the dry run cannot
see nor undo them. For that reason only sync handlers are run: an async handler's statements
go through the store's own connections, which commit on their own, so it is refused with a
message rather than run half-fenced.

The handler runs in the caller's thread, on the caller's connections, under the context the
claim would give it (``claim_context``: its author's, or its tenant's service context), with
the item as it is (or with the edited payload, validated against its kind first: an invalid
one raises ``InvalidPayload`` naming the field, and nothing runs). The item itself is not
touched: it stays failed, its attempts and error as they were. The dry run is audited
(``work.dry_run``, naming the operator, with the outcome and the counts) after the rollback.
"""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.mail.backends.base import BaseEmailBackend
from django.db import DatabaseError, connections, transaction
from django.utils.module_loading import import_string

from audit.api import append
from tenancy.contexts import AppType, RequestContext, new_request_context
from tenancy.scope import system_scope, tenant_scope
from tenancy.services import claim_context, operator_context
from workqueue.exceptions import Conflict, NotFound
from workqueue.handlers import Run, handler_for, is_async
from workqueue.kinds import get_kind, validate_payload
from workqueue.models import WorkItem
from workqueue.signals import work_enqueued
from wqcore.conf import system_alias, tenant_alias

# What PostgreSQL counted for this transaction, per table (n_tup_ins, n_tup_upd, n_tup_del).
_XACT_COUNTS = (
    "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables"
    " WHERE n_tup_ins + n_tup_upd + n_tup_del > 0"
)


class _RolledBack(Exception):
    """Raised at the end of every dry run to roll its transaction back. Never escapes."""


@dataclass(frozen=True)
class Written:
    """Rows a table would have had inserted, updated and deleted."""

    table: str
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    @property
    def total(self) -> int:
        return self.inserted + self.updated + self.deleted


@dataclass(frozen=True)
class DryRun:
    """What a dead letter's handler would have done (nothing of it committed)."""

    item_id: uuid.UUID
    kind: str
    payload: dict[str, Any]
    edited: bool
    succeeded: bool
    result: Any = None
    error: str = ""
    traceback: str = ""
    written: list[Written] = field(default_factory=list)
    emitted: list[dict[str, Any]] = field(default_factory=list)
    enqueued: list[dict[str, Any]] = field(default_factory=list)
    mail: list[dict[str, Any]] = field(default_factory=list)
    side_effect: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "item_id": str(self.item_id),
            "kind": self.kind,
            "payload": self.payload,
            "edited": self.edited,
            "succeeded": self.succeeded,
            "result": self.result,
            "error": self.error,
            "traceback": self.traceback,
            "written": [
                {
                    "table": w.table,
                    "inserted": w.inserted,
                    "updated": w.updated,
                    "deleted": w.deleted,
                }
                for w in self.written
            ],
            "emitted": self.emitted,
            "enqueued": self.enqueued,
            "mail": self.mail,
            "side_effect": self.side_effect,
        }

    def summary(self) -> dict[str, Any]:
        """What the audit entry keeps: the outcome and the counts, not the rows."""
        return {
            "kind": self.kind,
            "edited": self.edited,
            "succeeded": self.succeeded,
            "error": self.error[:500],
            "written": {w.table: w.total for w in self.written},
            "emitted": len(self.emitted),
            "enqueued": len(self.enqueued),
            "mail": len(self.mail),
        }


# -- mail: kept, for the dry run's thread only ------------------------------------------------

_MAIL = threading.local()
_MAIL_LOCK = threading.Lock()
_MAIL_USERS = 0
_PATCHED: dict[type, Any] = {}
_BUILTIN_BACKENDS = [
    f"django.core.mail.backends.{name}.EmailBackend"
    for name in ("console", "dummy", "filebased", "locmem", "smtp")
]


def _backends() -> list[type]:
    found: list[type] = []
    todo: list[type] = [BaseEmailBackend]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def _keeping(original: Any) -> Any:
    def send_messages(self: Any, email_messages: Any) -> int:
        kept = getattr(_MAIL, "kept", None)
        if kept is None:
            return int(original(self, email_messages) or 0)
        messages = list(email_messages)
        kept.extend(messages)
        return len(messages)

    send_messages.__wrapped__ = original  # type: ignore[attr-defined]
    return send_messages


@contextmanager
def _keep_mail() -> Iterator[list[Any]]:
    """Keep the mail this thread sends in the block (as Django's ``locmem`` backend keeps it):
    every mail backend's ``send_messages`` (Django's own and the site's, however configured:
    ``EMAIL_BACKEND`` or ``MAILERS``) keeps the messages of a thread in a dry run and sends
    every other thread's as before. Installed by the first dry run, removed by the last."""
    global _MAIL_USERS
    # Loaded now, so they are patched too: Django's backends and the site's mailers.
    for path in _BUILTIN_BACKENDS + [
        str(mailer.get("BACKEND", "")) for mailer in getattr(settings, "MAILERS", {}).values()
    ]:
        if path:
            import_string(path)

    with _MAIL_LOCK:
        if _MAIL_USERS == 0:
            for cls in _backends():
                if "send_messages" in cls.__dict__:
                    _PATCHED[cls] = cls.__dict__["send_messages"]
                    setattr(cls, "send_messages", _keeping(_PATCHED[cls]))  # noqa: B010
        _MAIL_USERS += 1
    kept: list[Any] = []
    _MAIL.kept = kept
    try:
        yield kept
    finally:
        _MAIL.kept = None
        with _MAIL_LOCK:
            _MAIL_USERS -= 1
            if _MAIL_USERS == 0:
                for cls, original in _PATCHED.items():
                    setattr(cls, "send_messages", original)  # noqa: B010
                _PATCHED.clear()


# -- what the run wrote ----------------------------------------------------------------------


def _aliases() -> list[str]:
    return list(dict.fromkeys([tenant_alias(), system_alias()]))


def _counts(alias: str) -> dict[str, tuple[int, int, int]]:
    with connections[alias].cursor() as cursor:
        cursor.execute(_XACT_COUNTS)
        return {name: (ins, upd, dele) for name, ins, upd, dele in cursor.fetchall()}


def _written(
    before: dict[str, dict[str, tuple[int, int, int]]],
    after: dict[str, dict[str, tuple[int, int, int]]],
) -> list[Written]:
    totals: dict[str, list[int]] = {}
    for alias, tables in after.items():
        for table, now in tables.items():
            was = before[alias].get(table, (0, 0, 0))
            sums = totals.setdefault(table, [0, 0, 0])
            for i in range(3):
                sums[i] += now[i] - was[i]
    return [Written(table, *sums) for table, sums in sorted(totals.items()) if any(sums)]


def _outbox_table() -> str | None:
    try:
        return str(apps.get_model("workqueue_outbox", "OutboxRow")._meta.db_table)
    except LookupError:  # the outbox app is not installed
        return None


def _read_emitted(org_id: uuid.UUID) -> list[dict[str, Any]]:
    """The outbox rows this transaction wrote in the tenant: pending, stamped with the
    transaction's own ``now()``, and inserted by it or one of its savepoints (their ids are
    never below the transaction's own)."""
    table = _outbox_table()
    if table is None:
        return []
    with tenant_scope(org_id) as alias, connections[alias].cursor() as cursor:
        cursor.execute(
            f"SELECT kind, payload::text FROM {connections[alias].ops.quote_name(table)}"
            " WHERE org_id = %s AND status = 'pending' AND created_at = now()"
            " AND xmin::text::bigint >= pg_current_xact_id()::text::bigint %% 4294967296"
            " ORDER BY id",
            [org_id],
        )
        return [{"kind": kind, "payload": json.loads(text)} for kind, text in cursor.fetchall()]


# -- the run ---------------------------------------------------------------------------------


def read_dead(item_id: uuid.UUID | str) -> WorkItem:
    """The dead letter ``item_id``, read across tenants (the operator's reading, on the system
    login); ``NotFound``, or ``Conflict`` when it is not a dead letter."""
    try:
        item_id = uuid.UUID(str(item_id))
    except ValueError:
        raise NotFound(f"item id: {item_id!r} is not a UUID") from None
    with system_scope() as alias:
        item = WorkItem.objects.using(alias).filter(id=item_id).first()
    if item is None:
        raise NotFound(f"work item {item_id} not found")
    if item.status != "failed":
        raise Conflict(
            f"work item {item_id} is {item.status}, not a dead letter: nothing to dry-run"
        )
    return item


def dry_run(
    actor: str,
    item_id: uuid.UUID | str,
    payload: dict[str, Any] | None = None,
    rctx: RequestContext | None = None,
) -> DryRun:
    """Run the handler of dead letter ``item_id`` (with ``payload`` in place of its own, once
    validated against its kind: ``InvalidPayload`` naming the field, nothing run) inside a
    transaction rolled back at the end, and report what it would have written, emitted,
    enqueued and mailed, and whether it would have succeeded. Appends a ``work.dry_run``
    audit entry in the item's tenant naming ``actor`` (the operator). Refuses (``Conflict``)
    an item that is not a dead letter, a kind with no handler here, and an async handler."""
    rctx = rctx or new_request_context(AppType.WEB)
    item = read_dead(item_id)
    edited = payload is not None
    if payload is not None:
        item.payload = json.loads(validate_payload(get_kind(item.kind), payload))
    handler = handler_for(item.kind)
    if handler is None:
        raise Conflict(f"kind {item.kind}: no handler in this process; nothing to dry-run")
    if is_async(handler):
        raise Conflict(
            f"kind {item.kind}: its handler is async, and an async handler's statements run on "
            "the store's own connections, which the dry run cannot roll back; nothing was run"
        )
    report = _run(handler, item, edited, rctx)
    append(
        operator_context(rctx, item.org_id, actor),
        "work.dry_run",
        ("workqueue.workitem", item.id),
        report.summary(),
    )
    return report


def _run(handler: Any, item: WorkItem, edited: bool, rctx: RequestContext) -> DryRun:
    ctx = claim_context(rctx, item.org_id, item.created_by, item.request_id)
    run = Run()
    run.dry_run = True
    emitted: list[dict[str, Any]] = []
    enqueued_ids: list[uuid.UUID] = []
    me = threading.get_ident()

    def on_enqueued(sender: Any, items: Any, **_: Any) -> None:
        if threading.get_ident() == me:
            enqueued_ids.extend(uuid.UUID(str(i)) for i, _kind, _lane in items)

    uid = f"{__name__}:{me}:{id(run)}"
    outcome: dict[str, Any] = {}
    aliases = _aliases()
    work_enqueued.connect(on_enqueued, dispatch_uid=uid, weak=False)
    try:
        with _keep_mail() as mail:
            try:
                with _atomic_all(aliases):
                    before = {alias: _counts(alias) for alias in aliases}
                    try:
                        outcome["result"] = handler.handle(ctx, item, run)
                        json.dumps(outcome["result"], allow_nan=False)
                    except (Exception, SystemExit) as exc:  # a handler's sys.exit() is its failure
                        outcome["error"] = (
                            f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                        )
                        outcome["traceback"] = "".join(traceback.format_exception(exc))
                        outcome.pop("result", None)
                    try:
                        outcome["written"] = _written(
                            before, {alias: _counts(alias) for alias in aliases}
                        )
                        outcome["enqueued"] = _read_enqueued(item.org_id, enqueued_ids)
                        emitted += _read_emitted(item.org_id)
                    except DatabaseError as exc:
                        outcome.setdefault("written", [])
                        outcome["unread"] = f"the handler left its transaction aborted ({exc})"
                    raise _RolledBack
            except _RolledBack:
                pass
    finally:
        work_enqueued.disconnect(dispatch_uid=uid)
    error = outcome.get("error", "")
    if "unread" in outcome:
        error = error or outcome["unread"]
    return DryRun(
        item_id=item.id,
        kind=item.kind,
        payload=item.payload,
        edited=edited,
        succeeded="error" not in outcome and "unread" not in outcome,
        result=outcome.get("result"),
        error=error,
        traceback=outcome.get("traceback", ""),
        written=outcome.get("written", []),
        emitted=emitted,
        enqueued=outcome.get("enqueued", []),
        mail=[{"subject": m.subject, "to": list(m.to), "from": m.from_email} for m in mail],
        side_effect=run.side_effect,
    )


@contextmanager
def _atomic_all(aliases: list[str]) -> Iterator[None]:
    """One transaction (or a savepoint of the caller's) on each alias, rolled back whenever
    the block raises: the dry run always ends by raising ``_RolledBack`` inside it."""
    if len(aliases) == 1:
        with transaction.atomic(using=aliases[0]):
            yield
        return
    with transaction.atomic(using=aliases[0]), transaction.atomic(using=aliases[1]):
        yield


def _read_enqueued(org_id: uuid.UUID, ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    if not ids:
        return []
    with tenant_scope(org_id) as alias:
        rows = (
            WorkItem.objects.using(alias).filter(id__in=ids).values("id", "kind", "lane", "payload")
        )
        return [{**row, "id": str(row["id"])} for row in rows]
