"""manage.py queue paused: every lane and kind paused now, who paused it, when and why."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from audit.api import actor_names
from workqueue.pauses import read_pauses

HELP = "list the paused lanes and kinds"


def add_arguments(parser: CommandParser) -> None:
    pass


def run(command: BaseCommand, **_: Any) -> None:
    pauses = read_pauses()
    if not pauses:
        command.stdout.write("nothing is paused")
        return
    names = actor_names(p.paused_by for p in pauses)
    for p in pauses:
        why = f" ({p.reason})" if p.reason else ""
        by = names.get(p.paused_by, p.paused_by)
        command.stdout.write(
            f"{p.target}\tpaused by {by} at {p.paused_at:%Y-%m-%d %H:%M:%S %Z}{why}"
        )
