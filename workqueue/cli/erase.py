"""``manage.py queue erase``: erase one tenant's rows from the queue's tables (its audit
entries kept, their data redacted), or one person's data (the payload fields their kinds
declare personal), as the site's operator (``workqueue/erase.py``).

    manage.py queue erase --tenant acme --dry-run           # rows per table, nothing changed
    manage.py queue erase --tenant acme [--force]           # refused while items run
    manage.py queue erase --subject email=ann@example.com [--tenant acme]

Each batch is its own short transaction; stopped midway (Ctrl-C, a crash), running it again
goes on with what is left. Audited (``queue.erase_started``, ``queue.erase_finished``).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from workqueue import api
from workqueue.cli._operator import add_user_argument, operator_actor
from workqueue.cli._tenant import add_tenant_argument, tenant_of
from workqueue.erase import BATCH_MAX, Erased
from wqcore.terminal import Progress

HELP = "erase a tenant's rows (--tenant) or one person's data (--subject FIELD=VALUE)"


def add_arguments(parser: CommandParser) -> None:
    add_tenant_argument(parser, "the tenant to erase (with --subject: only this tenant's items)")
    parser.add_argument(
        "--subject",
        metavar="FIELD=VALUE",
        help="redact the personal field FIELD (as kinds declare: Kind(personal=...)) wherever "
        "an item's payload has VALUE there",
    )
    parser.add_argument("--force", action="store_true", help="erase even while items run (claimed)")
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would go, table by table; change nothing"
    )
    parser.add_argument(
        "--batch", type=int, default=1000, help=f"rows per statement (1 to {BATCH_MAX})"
    )
    parser.add_argument(
        "--pause-ms",
        type=int,
        default=0,
        help="wait this long between batches, leaving the server to other tenants' work",
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
    add_user_argument(parser)


def _subject(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    field, equals, value = text.partition("=")
    if not equals or not field or not value:
        raise CommandError(f"--subject: FIELD=VALUE, e.g. email=ann@example.com (got {text!r})")
    return field, value


def _table(result: Erased, what: str) -> str:
    rows = [(what, "found", "erased", "left")]
    for name, found in result.found.items():
        rows.append(
            (name, f"{found:,}", f"{result.erased.get(name, 0):,}", f"{result.left.get(name, 0):,}")
        )
    if result.dry_run:
        rows = [(name, found) for name, found, *_ in rows]  # type: ignore[misc]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


def run(command: Any, **options: Any) -> None:
    subject = _subject(options.get("subject"))
    org_id = tenant_of(options)
    if org_id is None and subject is None:
        raise CommandError(
            "name a tenant (--tenant ORG_OR_SLUG) or a subject (--subject FIELD=VALUE)"
        )
    if not 0 <= options["pause_ms"] <= 10_000:
        raise CommandError(f"--pause-ms: 0 to 10000 (got {options['pause_ms']})")
    actor = operator_actor(options.get("user"))
    progress = Progress(command.stderr, wanted=not options.get("json"))

    def on_batch(table: str, so_far: int) -> None:
        progress.say(f"erase: {table} {so_far:,}")

    try:
        with progress:
            result = api.erase(
                actor,
                org_id,
                subject=subject,
                force=options["force"],
                dry_run=options["dry_run"],
                batch=options["batch"],
                pause_s=options["pause_ms"] / 1000,
                on_batch=on_batch,
            )
    except (api.InvalidPayload, api.Conflict) as exc:
        raise CommandError(str(exc)) from None
    if options.get("json"):
        said = {
            "found": result.found,
            "erased": result.erased,
            "left": result.left,
            "running": result.running,
            "dry_run": result.dry_run,
        }
        command.stdout.write(json.dumps(said, sort_keys=True))
        return
    command.stdout.write(_table(result, "kind" if subject else "table"))
    if result.dry_run:
        command.stdout.write(
            f"dry run: nothing changed ({result.running} running item(s)"
            + (": refused without --force)" if result.running else ")")
        )
    elif result.complete:
        command.stdout.write("erased: nothing of it is left")
    else:
        command.stdout.write(
            f"{sum(result.left.values()):,} row(s) left (held by another transaction, or "
            "claimed since it began): run it again"
        )
