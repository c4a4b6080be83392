"""manage.py migrate: Django's, run as the owner login (alias ``admin``) unless told otherwise.

The everyday login may not change the schema, so a plain ``migrate`` would fail on it.
"""

from __future__ import annotations

from django.core.management.base import CommandParser
from django.core.management.commands.migrate import Command as DjangoMigrate


class Command(DjangoMigrate):
    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.set_defaults(database="admin")
