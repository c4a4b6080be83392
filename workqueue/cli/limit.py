"""manage.py queue limit set|clear|list: rate limits, N per period on a kind, a lane, a tenant
or a rate key, held by every worker's claim from its next claim on (no restart). Audited
(``queue.rate_limit_set``, ``queue.rate_limit_cleared``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.api import actor_names
from workqueue import api
from workqueue.cli._operator import add_user_argument, operator_actor
from workqueue.cli._tenant import tenant_of
from workqueue.rate_limits import SCOPES, clear_rate_limit, read_rate_limits, set_rate_limit

HELP = "set, clear or list rate limits (N per period on a kind, lane, tenant or rate key)"


def add_arguments(parser: CommandParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    for name, help_text in (("set", "set or change a limit"), ("clear", "remove a limit")):
        sub = actions.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("scope", choices=SCOPES, help="what the limit counts items by")
        sub.add_argument(
            "target",
            help="the kind, lane, tenant (an org's slug or id) or rate key; '*': each apart",
        )
        if name == "set":
            sub.add_argument("rate", help="N/s, N/m, N/h or N/d, e.g. 10/s")
            sub.add_argument("--burst", type=int, default=None, help="at once (default: N)")
        add_user_argument(sub)
    actions.add_parser("list", help="every limit and how much of its burst is free now")


def run(command: BaseCommand, *, action: str, **options: Any) -> None:
    if action == "list":
        _list(command)
        return
    actor = operator_actor(options.get("user"))
    scope, target = options["scope"], options["target"]
    if scope == "tenant" and target != "*":
        # Named as --tenant names one; the limit keeps the queue's id.
        target = str(tenant_of({"tenant": target}, "target"))
    try:
        if action == "set":
            limit = set_rate_limit(actor, scope, target, options["rate"], options["burst"])
            command.stdout.write(
                f"limited {limit.scope} {limit.target} to {limit.rate} (burst {limit.burst})"
            )
            return
        cleared = clear_rate_limit(actor, scope, target)
    except api.InvalidPayload as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(
        f"cleared the limit on {scope} {target}"
        if cleared
        else f"{scope} {target} had no limit: nothing changed"
    )


def _list(command: BaseCommand) -> None:
    limits = read_rate_limits()
    if not limits:
        command.stdout.write("no rate limit is set")
        return
    names = actor_names(lim.set_by for lim in limits)
    for lim in limits:
        # What is free now, not what is spent: "spent now 5" read as five items run.
        command.stdout.write(
            f"{lim.scope}\t{lim.target}\t{lim.rate}\tburst {lim.burst}"
            f"\t{lim.burst - lim.used} of {lim.burst} free now\tbuckets empty {lim.blocked}"
            f"\tset by {names.get(lim.set_by, lim.set_by)}"
        )
