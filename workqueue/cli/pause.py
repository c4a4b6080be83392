"""manage.py queue pause LANE[:KIND]: stop every worker from claiming a lane's (or one kind's)
items until ``queue resume``; items already claimed run on. Audited (``queue.paused``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workqueue import api
from workqueue.cli._operator import actor_name, add_user_argument, operator_actor
from workqueue.pauses import parse_target, pause

HELP = "pause a lane (LANE) or one kind in it (LANE:KIND) for every worker"


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("target", metavar="LANE[:KIND]", help="the lane, or lane:kind, to pause")
    parser.add_argument("--reason", default="", help="why (kept with the pause and its audit)")
    add_user_argument(parser)


def run(command: BaseCommand, *, target: str, reason: str, user: str | None, **_: Any) -> None:
    actor = operator_actor(user)
    try:
        lane, kind = parse_target(target)
        paused, changed = pause(actor, lane, kind, reason=reason)
    except api.InvalidPayload as exc:
        raise CommandError(str(exc)) from None
    if changed:
        command.stdout.write(f"paused {paused.target}: workers claim none of its items")
    else:
        command.stdout.write(
            f"{paused.target} was already paused (by {actor_name(paused.paused_by)} at "
            f"{paused.paused_at:%Y-%m-%d %H:%M:%S %Z}): nothing changed"
        )
