"""manage.py queue stats: the queue's depth by lane, kind and status, each lane's due work and
oldest wait, and the dead letters by kind and error; ``--json`` for scripts. Read across
tenants on the system login (or one tenant's, under its row-level security, with --tenant)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workqueue import api
from workqueue.cli._tenant import add_tenant_argument, tenant_of
from workqueue.figures import read_due_lanes, read_gauges_of
from workqueue.triage import DeadFilter, group_dead

HELP = (
    "Show the queue's depth by lane, kind and status, the oldest wait per lane, and the dead "
    "letters by kind and error (--json for scripts)."
)
# The dead-letter groups shown (the most numerous first).
GROUPS_SHOWN = 10


def add_arguments(parser: CommandParser) -> None:
    add_tenant_argument(parser, "only this tenant's items")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def read_stats(org_id: uuid.UUID | None) -> dict[str, Any]:
    """Everything ``stats`` prints, as plain values."""
    gauges = read_gauges_of(org_id)
    due = read_due_lanes(org_id)
    grouped = group_dead(DeadFilter(), org_id)
    by_status: dict[str, int] = {}
    depth = []
    for (lane, kind, status), n in sorted(gauges.counts.items()):
        by_status[status] = by_status.get(status, 0) + n
        depth.append({"lane": lane, "kind": kind, "status": status, "items": n})
    return {
        "tenant": str(org_id) if org_id else None,
        "depth": depth,
        "by_status": by_status,
        "oldest_age_s": round(gauges.oldest_age_s, 3),
        "lanes": [
            {"lane": d.lane, "due": d.due, "oldest_age_s": round(d.oldest_age_s, 3)} for d in due
        ],
        "dead_letters": gauges.failed,
        "dead_letter_groups": [
            {
                "kind": g.kind,
                "error": g.error,
                "items": g.items,
                "first_failed": g.first_failed.isoformat(),
                "last_failed": g.last_failed.isoformat(),
            }
            for g in grouped.groups[:GROUPS_SHOWN]
        ],
    }


def run(command: BaseCommand, **options: Any) -> None:
    stats = read_stats(tenant_of(options))
    if options.get("json"):
        command.stdout.write(json.dumps(stats, sort_keys=True))
        return
    out = command.stdout.write
    statuses = list(api.Status.values)
    out(f"{'lane':<20} {'kind':<24} " + " ".join(f"{s:>9}" for s in statuses))
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for row in stats["depth"]:
        rows.setdefault((row["lane"], row["kind"]), {})[row["status"]] = row["items"]
    for (lane, kind), counts in rows.items():
        out(f"{lane:<20} {kind:<24} " + " ".join(f"{counts.get(s, 0):>9}" for s in statuses))
    if not rows:
        out("(no work items)")
    out("")
    totals = ", ".join(f"{s} {stats['by_status'].get(s, 0)}" for s in statuses)
    # "due", not "waiting": waiting is the status of steps whose parents have not ended.
    out(f"total: {totals}; oldest due {stats['oldest_age_s']:.1f} s")
    for lane in stats["lanes"]:
        out(f"lane {lane['lane']}: {lane['due']} due, oldest due {lane['oldest_age_s']:.1f} s")
    out(f"dead letters: {stats['dead_letters']}")
    for group in stats["dead_letter_groups"]:
        out(f"  {group['items']:>8}  {group['kind']}  {group['error']}")
