"""manage.py create_logins: create the everyday and system logins, idempotently."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from project.database import DatabaseUrls, url_for
from project.logins import ensure_logins


class Command(BaseCommand):
    help = (
        "Create (or put back) the everyday login of DATABASE_URL (no superuser, no BYPASSRLS) "
        "and the system login of SYSTEM_DATABASE_URL (BYPASSRLS), and the database, as the "
        "owner of ADMIN_DATABASE_URL. Safe to run again. Table grants follow every migrate."
    )
    # The logins this creates are what the checks look for.
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        urls = DatabaseUrls(
            *(url_for(settings.DATABASES[a]) for a in ("default", "system", "admin"))
        )
        ensure_logins(urls)
        self.stdout.write(
            f"logins ready: {settings.DATABASES['default']['USER']} (everyday), "
            f"{settings.DATABASES['system']['USER']} (system)"
        )
