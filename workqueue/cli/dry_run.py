"""manage.py queue dry-run ITEM_ID [--payload JSON]: run a dead letter's handler inside a
transaction rolled back at the end, and print what it would write, emit, enqueue and mail
(``workqueue/triage/dry_run.py``); exits 1 when the handler would fail."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workqueue.cli._operator import add_user_argument, operator_actor
from workqueue.exceptions import WorkQueueError
from workqueue.triage.dry_run import DryRun, dry_run

HELP = (
    "Run a dead letter's handler in a transaction that is rolled back, and print what it would "
    "write, emit, enqueue and mail; exits 1 when the handler would fail. Audited (work.dry_run)."
)


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("item_id", metavar="ITEM_ID", help="the dead letter's id")
    parser.add_argument(
        "--payload",
        metavar="JSON",
        help="run with this payload instead of the item's (validated against its kind)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_user_argument(parser)


def run(command: BaseCommand, **options: Any) -> None:
    payload = None
    if options.get("payload") is not None:
        try:
            payload = json.loads(options["payload"])
        except ValueError as exc:
            raise CommandError(f"--payload: not JSON ({exc})") from None
    actor = operator_actor(options.get("user"))
    try:
        report = dry_run(actor, options["item_id"], payload)
    except WorkQueueError as exc:
        raise CommandError(str(exc)) from None
    if options.get("json"):
        command.stdout.write(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        command.stdout.write(render(report))
    if not report.succeeded:
        raise CommandError(f"the handler would fail: {report.error}", returncode=1)


def render(report: DryRun) -> str:
    """The report as an operator reads it on a terminal."""
    lines = [
        f"dry run of {report.kind} {report.item_id}"
        + (" (edited payload)" if report.edited else "")
        + ": nothing was committed",
        "outcome: " + ("would succeed" if report.succeeded else f"would fail: {report.error}"),
    ]
    if report.traceback:
        lines += ["", report.traceback.rstrip(), ""]
    lines.append("rows it would write:" if report.written else "rows it would write: none")
    for w in report.written:
        lines.append(
            f"  {w.table}: {w.inserted} inserted, {w.updated} updated, {w.deleted} deleted"
        )
    lines.append(f"outbox messages: {len(report.emitted)}")
    lines += [f"  {m['kind']} {json.dumps(m['payload'])}" for m in report.emitted]
    lines.append(f"items it would enqueue: {len(report.enqueued)}")
    lines += [f"  {i['kind']} lane={i['lane']} {json.dumps(i['payload'])}" for i in report.enqueued]
    lines.append(f"mail it would send (kept, not sent): {len(report.mail)}")
    lines += [f"  {m['subject']!r} to {', '.join(m['to'])}" for m in report.mail]
    return "\n".join(lines)
