"""``manage.py queue cancel``: cancel one item by id, or every item of a kind (and lane,
status, tenant), as the site's operator.

    manage.py queue cancel 0193...                         # one item, whatever its tenant
    manage.py queue cancel --kind SEND_RECEIPT [--lane L] [--tenant T] [--status pending]

A waiting or pending item is cancelled at once; a running one's worker is asked and ends it at
its next lease renewal. The bulk cancel runs in statements of ``--batch`` items (each its own short
transaction, audited per item) until nothing more matches; stopped midway (Ctrl-C,
``--max-batches``), running it again goes on with the rest. The audit entries name
``--actor`` (default ``(cli:<login name>)``).
"""

from __future__ import annotations

import dataclasses
import getpass
import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from tenancy.contexts import AppType, new_request_context
from workqueue import api
from workqueue.cancel import (
    BULK_BATCH,
    CANCELLABLE,
    BulkCancelled,
    operator_cancel,
    operator_cancel_matching,
)
from workqueue.cli._tenant import add_tenant_argument, tenant_of
from wqcore.terminal import Progress

HELP = "cancel an item by id, or every item of a kind (--kind, with --lane, --status, --tenant)"


def _default_actor() -> str:
    try:
        name = getpass.getuser()
    except Exception:  # no login name (a container): still say it was the command line
        name = "unknown"
    return f"(cli:{name})"


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("item_id", nargs="?", help="the item to cancel (its id)")
    parser.add_argument("--kind", help="cancel every item of this kind (bulk)")
    parser.add_argument("--lane", help="bulk: only items of this lane")
    add_tenant_argument(parser, "bulk: only items of this tenant")
    parser.add_argument(
        "--status",
        action="append",
        choices=sorted(CANCELLABLE),
        help="bulk: only items of this status (repeat for more; default: all three)",
    )
    parser.add_argument("--batch", type=int, default=BULK_BATCH, help="bulk: items per statement")
    parser.add_argument("--max-batches", type=int, help="bulk: stop after this many statements")
    parser.add_argument("--actor", help="who the audit entries name (default: (cli:<login>))")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the outcome as one JSON object (and no progress: on a terminal, stderr "
        "shows how far a bulk cancel got while it runs)",
    )


def run(command: Any, **options: Any) -> None:
    item_id, kind = options.get("item_id"), options.get("kind")
    if bool(item_id) == bool(kind):
        raise CommandError("name an item id, or --kind for a bulk cancel (not both)")
    actor = options.get("actor") or _default_actor()
    try:
        if not kind:  # so the item id is given
            if options.get("lane") or options.get("tenant") or options.get("status"):
                raise CommandError("--lane, --tenant and --status go with --kind")
            rctx = new_request_context(AppType.CLI)
            item = operator_cancel(rctx, actor, item_id)
            what = "cancelled" if item.status == api.Status.CANCELLED else "cancel requested"
            if options.get("json"):
                said = {"id": str(item.id), "status": str(item.status), "tenant": str(item.org_id)}
                command.stdout.write(json.dumps(said, sort_keys=True))
            else:
                command.stdout.write(f"{item.id} {what} (tenant {item.org_id})")
            return
        progress = Progress(command.stderr, wanted=not options.get("json"))

        def on_batch(so_far: BulkCancelled) -> None:
            progress.say(
                f"cancel {kind}: {so_far.cancelled:,} cancelled, {so_far.requested:,} running "
                f"asked to stop ({so_far.batches:,} batch(es))"
            )

        with progress:
            result = operator_cancel_matching(
                actor,
                kind,
                org_id=tenant_of(options),
                lane=options.get("lane"),
                statuses=options.get("status"),
                batch=options["batch"],
                max_batches=options.get("max_batches"),
                on_batch=on_batch,
            )
    except ValueError as exc:  # InvalidPayload too: one line naming the field
        raise CommandError(str(exc)) from None
    except (api.NotFound, api.Conflict) as exc:
        raise CommandError(str(exc)) from None
    if options.get("json"):
        command.stdout.write(json.dumps(dataclasses.asdict(result), sort_keys=True))
        return
    command.stdout.write(
        f"cancelled={result.cancelled} requested={result.requested} batches={result.batches} "
        + ("finished" if result.finished else "stopped early: run it again to go on")
    )
