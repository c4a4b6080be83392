"""Only the owner login (alias ``admin``) changes the schema.

The everyday and system logins hold no right on the schema (nor on ``django_migrations``), so
Django must neither migrate through them nor read their migration history
(``makemigrations`` checks every alias a router allows).
"""

from __future__ import annotations

from typing import Any

OWNER_ALIAS = "admin"


class OwnerMigratesRouter:
    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return db == OWNER_ALIAS
