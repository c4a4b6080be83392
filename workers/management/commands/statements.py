"""manage.py statements: every named statement as it is sent, whole (its fragments, locking
subqueries and the site's parts filled in), or the list of their names.

    manage.py statements                 # every name, with its line of intent
    manage.py statements workqueue.claim # that statement, as the database receives it
    manage.py statements claim --native  # with PostgreSQL's $1, $2 placeholders (what is sent)
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError, CommandParser

from wqcore.statements import Statement, statements

# Packages of an app that hold no statements, or must not be imported by a command that reads.
_SKIPPED = {"migrations", "management", "templates", "tests"}


def _import_all() -> None:
    """Import every module of the queue's apps (and wqcore), so each one's statements exist."""
    roots = {"wqcore"} | {
        config.name.split(".")[0]
        for config in apps.get_app_configs()
        if config.name.split(".")[0] in {"audit", "tenancy", "workqueue", "outbox", "workers"}
    }
    for root in sorted(roots):
        package = importlib.import_module(root)
        for module in pkgutil.walk_packages(package.__path__, f"{root}."):
            if _SKIPPED.isdisjoint(module.name.split(".")):
                importlib.import_module(module.name)


def _intent(statement: Statement) -> str:
    first = (statement.directory / f"{statement.name}.sql").read_text().split("\n", 1)[0]
    return first.removeprefix("-- ").split(": ", 1)[-1]


class Command(BaseCommand):
    help = (
        "Print a named statement whole, as it is sent (fragments, locking subqueries and the "
        "site's parts filled in); with no name, list every statement and its line of intent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "names",
            nargs="*",
            metavar="NAME",
            help="a statement's name, e.g. workqueue.claim (or claim, when only one app has it)",
        )
        parser.add_argument(
            "--native",
            action="store_true",
            help="with PostgreSQL's own placeholders ($1, $2, ... in the parameters' order), "
            "as the driver sends it",
        )

    def handle(self, *args: Any, names: list[str], native: bool = False, **options: Any) -> None:
        _import_all()
        known = statements()
        if not names:
            width = max(len(name) for name in known)
            for name, statement in known.items():
                self.stdout.write(f"{name:<{width}}  {_intent(statement)}")
            return
        for name in names:
            statement = self._find(known, name)
            params = ", ".join(statement.params._fields) or "none"
            self.stdout.write(f"-- {name}: parameters {params}")
            self.stdout.write(statement.native_sql if native else statement.sql)

    @staticmethod
    def _find(known: dict[str, Statement], name: str) -> Statement:
        if name in known:
            return known[name]
        matches = [full for full in known if full.split(".", 1)[1] == name]
        if len(matches) == 1:
            return known[matches[0]]
        if matches:
            raise CommandError(f"{name!r} is in more than one app: name one of {matches}")
        raise CommandError(
            f"no statement named {name!r}: manage.py statements lists them (e.g. workqueue.claim)"
        )
