"""manage.py queue requeue: put every dead letter a filter matches back to pending (attempts
reset, due now): the admin's "requeue all matching", fenced and audited the same way."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workqueue.cli import _matching

HELP = (
    "Requeue the dead letters a filter matches (--kind, --error-contains, --failed-since, "
    "--lane, --tenant): fenced on the moment it starts, audited per item, in bounded batches."
)


def add_arguments(parser: CommandParser) -> None:
    _matching.add_arguments(parser)


def run(command: BaseCommand, **options: Any) -> None:
    _matching.run("requeue", command, **options)
