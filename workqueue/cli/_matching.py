"""What ``queue requeue`` and ``queue discard`` share: the dead-letter filter from the command
line, and the triage by filter the admin's filter action runs (``act_on_every_match``:
fenced on the moment the command started, audited per item, in bounded batches)."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy.contexts import AppType, OpContext, new_request_context
from tenancy.services import operator_context
from workqueue import api
from workqueue.cli._tenant import add_tenant_argument, tenant_of
from workqueue.triage import DeadFilter, act_on_every_match, count_dead, group_dead, parse_since
from wqcore.actor import SYSTEM_ACTOR
from wqcore.conf import effective
from wqcore.terminal import Progress


def add_arguments(parser: CommandParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "settings (WORKQUEUE[...]):\n" + effective(("TRIAGE_",))
    parser.add_argument("--kind", help="only dead letters of this kind")
    parser.add_argument(
        "--error-contains",
        metavar="TEXT",
        help="only those whose error contains TEXT (any case; without --failed-since, within "
        "the last TRIAGE_SEARCH_WINDOW_S)",
    )
    parser.add_argument(
        "--failed-since",
        metavar="WHEN",
        help="only those failed at or after WHEN: ISO 8601 with a zone, a date, or a while ago "
        "(30m, 6h, 2d)",
    )
    parser.add_argument("--lane", help="only dead letters of this lane")
    add_tenant_argument(parser, "only this tenant's")
    parser.add_argument(
        "--as-of",
        metavar="WHEN",
        help="the fence: only items failed no later than WHEN and unchanged since (default: "
        "now, as the database says when the command starts; a --dry-run prints it)",
    )
    parser.add_argument(
        "--user",
        metavar="USERNAME",
        help="the site's user the audit entries name (default: the system actor)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="act on every dead letter when no filter is given (refused otherwise)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say how many match, and what, without changing"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the outcome as one JSON object (and no progress: on a terminal, stderr "
        "shows how far it got while it runs)",
    )


def _filter(options: dict[str, Any]) -> DeadFilter:
    org_id = tenant_of(options)
    try:
        since = options.get("failed_since")
        return DeadFilter(
            kind=options.get("kind") or None,
            lane=options.get("lane") or None,
            error_contains=options.get("error_contains") or None,
            failed_since=parse_since(since, "--failed-since") if since else None,
            org_id=org_id,
        ).checked()
    except api.InvalidPayload as exc:
        raise CommandError(str(exc).replace("error_contains:", "--error-contains:")) from None


def _actor(username: str | None) -> str:
    if not username:
        return SYSTEM_ACTOR
    User = get_user_model()
    try:
        user = User._default_manager.get_by_natural_key(username)
    except User.DoesNotExist:
        raise CommandError(f"--user: no user {username!r}") from None
    return str(user.pk)


def run(action: str, command: BaseCommand, **options: Any) -> None:
    """Count what the filter matches (as of now, or ``--as-of``), then, unless ``--dry-run``,
    act on it in rounds until nothing the fence admits is left."""
    dead = _filter(options)
    if not dead.described() and not options.get("all"):
        raise CommandError(
            "no filter given: name --kind, --error-contains, --failed-since, --lane or "
            "--tenant, or say --all to act on every dead letter"
        )
    actor = _actor(options.get("user"))
    try:
        until = parse_since(options["as_of"], "--as-of") if options.get("as_of") else None
    except api.InvalidPayload as exc:
        raise CommandError(str(exc)) from None
    counted = count_dead(dead, None, until)
    until = until or counted.read_at
    outcome: dict[str, Any] = {
        "action": action,
        "filter": dead.described(),
        "as_of": until.isoformat(),
        "matching": counted.items,
        "matching_capped": counted.capped,
        "tenants": len(counted.by_tenant),
        "dry_run": bool(options.get("dry_run")),
    }
    if options.get("dry_run"):
        groups = group_dead(dead).groups[:10]
        outcome["groups"] = [{"kind": g.kind, "error": g.error, "items": g.items} for g in groups]
        _say(command, options, outcome)
        return
    rctx = new_request_context(AppType.CLI)

    def context_of(org_id: uuid.UUID) -> OpContext:
        return operator_context(rctx, org_id, actor)

    changed = left = 0
    progress = Progress(command.stderr, wanted=not options.get("json"))
    so_far = [0]

    def on_batch(moved: int) -> None:
        so_far[0] += moved
        share = f" ({100 * so_far[0] // counted.items}%)" if counted.items else ""
        progress.say(f"{action}: {so_far[0]:,} of {counted.items:,} dead letter(s){share}")

    with progress:
        while True:
            swept = act_on_every_match(action, dead, until, context_of, on_batch=on_batch)
            changed, left = changed + swept.changed, left + swept.left_alone
            # A round that changed nothing and read nothing new cannot get further.
            if swept.done or (swept.changed == 0 and swept.left_alone == 0):
                break
    # What matched as of the fence, less what changed: changed since, left as they are.
    left = max(left, counted.items - changed) if swept.done and not counted.capped else left
    outcome.update(changed=changed, left_alone=left, done=swept.done)
    _say(command, options, outcome)


def _say(command: BaseCommand, options: dict[str, Any], outcome: dict[str, Any]) -> None:
    if options.get("json"):
        command.stdout.write(json.dumps(outcome, sort_keys=True))
        return
    described = ", ".join(f"{k}={v!r}" for k, v in outcome["filter"].items()) or "every dead letter"
    matching = ("more than " if outcome["matching_capped"] else "") + str(outcome["matching"])
    command.stdout.write(
        f"{outcome['action']}: {matching} dead letter(s) match {described}, failed no later "
        f"than {outcome['as_of']}, in {outcome['tenants']} tenant(s)"
    )
    if outcome["dry_run"]:
        for group in outcome["groups"]:
            command.stdout.write(f"  {group['items']:>8}  {group['kind']}  {group['error']}")
        command.stdout.write(
            f"dry run: nothing was changed (to act on exactly these: --as-of {outcome['as_of']})"
        )
        return
    command.stdout.write(
        command.style.SUCCESS(f"{outcome['action']}: done for {outcome['changed']} item(s)")
        + (
            f"; {outcome['left_alone']} changed since {outcome['as_of']} and were left alone"
            if outcome["left_alone"]
            else ""
        )
    )
