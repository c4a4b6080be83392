"""manage.py queue resume LANE[:KIND]: let workers claim a paused lane's (or kind's) items
again, waking them at once (``work_available``). Audited (``queue.resumed``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workqueue import api
from workqueue.cli._operator import actor_name, add_user_argument, operator_actor
from workqueue.pauses import parse_target, read_pauses, resume

HELP = "resume a paused lane (LANE) or kind (LANE:KIND): workers claim it again at once"


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("target", metavar="LANE[:KIND]", help="the lane, or lane:kind, to resume")
    add_user_argument(parser)


def run(command: BaseCommand, *, target: str, user: str | None, **_: Any) -> None:
    actor = operator_actor(user)
    try:
        lane, kind = parse_target(target)
        ended = resume(actor, lane, kind)
    except api.InvalidPayload as exc:
        raise CommandError(str(exc)) from None
    if ended is None:
        command.stdout.write(f"{target} was not paused: nothing changed")
        return
    by = actor_name(ended.paused_by)
    command.stdout.write(f"resumed {ended.target} (paused by {by}): workers woken")
    if not ended.kind:
        kinds = [p.target for p in read_pauses() if p.lane == ended.lane]
        if kinds:
            command.stdout.write(f"still paused on their own: {', '.join(kinds)}")
