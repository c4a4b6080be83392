"""manage.py set_login_settings: the queue's session defaults (jit off, UTC) on the logins of
the everyday and system aliases, each set by itself."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workqueue.logins import set_login_settings
from wqcore.conf import LOGIN_SETTINGS


class Command(BaseCommand):
    help = (
        "Set jit = off and timezone = 'UTC' as the session defaults of the logins of "
        "WORKQUEUE['DATABASE_ALIAS'] and ['SYSTEM_DATABASE_ALIAS'] (ALTER ROLE CURRENT_USER "
        "SET ..., each login for itself: no privilege needed). The fair claim needs jit off. "
        "Safe to run again; the orgs tenancy's create_logins does the same."
    )
    # What it sets is what the check warns of (workqueue.W001).
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        said = ", ".join(f"{name} = {value}" for name, value in LOGIN_SETTINGS)
        for user, aliases in set_login_settings().items():
            self.stdout.write(f"login {user} ({', '.join(aliases)}): {said}")
