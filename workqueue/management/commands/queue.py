"""manage.py queue <subcommand>: the queue's operations from the command line (the same fenced,
audited transitions as the admin and the API)."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workqueue.cli import SUBCOMMANDS, module_name


def _modules() -> dict[str, ModuleType]:
    return {
        name: importlib.import_module(f"workqueue.cli.{module_name(name)}") for name in SUBCOMMANDS
    }


class Command(BaseCommand):
    help = "Operate the queue: " + ", ".join(SUBCOMMANDS) + " (each has its own --help)."

    def add_arguments(self, parser: CommandParser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", required=True)
        for name, module in _modules().items():
            sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
            module.add_arguments(sub)

    def handle(self, *args: Any, subcommand: str, **options: Any) -> None:
        module = _modules().get(subcommand)
        if module is None:
            raise CommandError(f"no such subcommand {subcommand!r}: {', '.join(SUBCOMMANDS)}")
        module.run(self, **options)
