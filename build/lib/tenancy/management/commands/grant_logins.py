"""manage.py grant_logins: grant the everyday and system logins what the product's tables need
(and nothing on any other table); run after each migrate, as the owner."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tenancy.grants import apply_grants, grant_statements, our_tables


class Command(BaseCommand):
    help = (
        "Take every right of the everyday and system logins on the product's own tables away, "
        "then grant each what it needs (the system login: rows of every product table, never "
        "rewriting the audit trail; the everyday login: each app's sql/grants.sql). No other "
        "table is touched. Runs as the owner alias's login; a site with one login needs none."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--print", action="store_true", help="print the statements instead of running them"
        )

    def handle(self, *args: Any, print: bool, **options: Any) -> None:
        if print:
            for statement in grant_statements("<everyday login>", "<system login>"):
                self.stdout.write(statement.rstrip() + ";")
            return
        statements = apply_grants()
        if not statements:
            self.stdout.write("one login for everything: no grants to give")
            return
        self.stdout.write(f"grants applied on {len(our_tables())} tables of the product")
