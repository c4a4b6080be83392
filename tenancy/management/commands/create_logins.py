"""manage.py create_logins: create the orgs tenancy's everyday and system logins, idempotently,
then grant them what the product's tables need."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from tenancy.grants import apply_grants, our_tables
from tenancy.logins import ensure_logins
from wqcore.conf import owner_alias, system_alias, tenant_alias


class Command(BaseCommand):
    help = (
        "Create (or put back) the login of the everyday alias (no superuser, no BYPASSRLS) and "
        "of the system alias (BYPASSRLS), with jit off and UTC, and their database, as the "
        "owner alias's login; then, once the tables exist, grant them what the product's "
        "tables need (as grant_logins). Safe to run again. The aliases are "
        "WORKQUEUE['DATABASE_ALIAS'], ['SYSTEM_DATABASE_ALIAS'], ['OWNER_DATABASE_ALIAS']."
    )
    # The logins this creates are what the checks look for.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-grants", action="store_true", help="create the logins only (before migrate)"
        )

    def handle(self, *args: Any, no_grants: bool, **options: Any) -> None:
        app, system = settings.DATABASES[tenant_alias()], settings.DATABASES[system_alias()]
        ensure_logins(app, system, settings.DATABASES[owner_alias()])
        self.stdout.write(f"logins ready: {app['USER']} (everyday), {system['USER']} (system)")
        if no_grants:
            return
        # Before migrate (a new database, or a release with new tables) the grants would name
        # tables not there yet: they wait for migrate.
        missing = set(our_tables()) - set(connections[owner_alias()].introspection.table_names())
        if missing:
            self.stdout.write(
                f"{len(missing)} of the product's tables not there yet: run migrate, then"
                " manage.py grant_logins"
            )
            return
        apply_grants()
        self.stdout.write("grants applied on the product's tables")
