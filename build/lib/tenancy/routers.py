"""Routers for the orgs tenancy's three logins (add them to ``DATABASE_ROUTERS`` with them).

``SignInRouter``: users, groups, permissions, sessions and the admin's own change log belong
to no tenant, and signing in is how a request finds out its tenant, so no tenant can be named
while reading them. They are routed to the system login, and the everyday login holds no right
on them at all: SQL run as the everyday login, scoped to one tenant, can neither read another
tenant's users (their password hashes) or session keys nor change them. A tenant's own people
are read through ``Membership``, which row-level security fences.

``OwnerMigratesRouter``: only the owner login changes the schema; the everyday and system
logins hold no right on it (nor on ``django_migrations``), so Django must neither migrate
through them nor read their migration history (``makemigrations`` checks every alias a router
allows). Migrate with ``manage.py migrate --database <owner alias>``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Model

from wqcore.conf import owner_alias, system_alias

# app_label.model_name, lower case, besides the user model and its many-to-many tables.
SIGN_IN_MODELS = frozenset(
    {
        "auth.group",
        "auth.group_permissions",
        "auth.permission",
        "sessions.session",
        "admin.logentry",
    }
)


def sign_in_models() -> frozenset[str]:
    user = settings.AUTH_USER_MODEL.lower()
    return SIGN_IN_MODELS | {user, f"{user}_groups", f"{user}_user_permissions"}


def _is_sign_in(model: type[Model]) -> bool:
    return model._meta.label_lower in sign_in_models()


class SignInRouter:
    """Routes the sign-in models to the system login; has no opinion on any other model."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return system_alias() if _is_sign_in(model) else None

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return system_alias() if _is_sign_in(model) else None

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        # A membership (read on the everyday login) points at its user (read on the system
        # login): two logins, one database.
        if _is_sign_in(type(obj1)) or _is_sign_in(type(obj2)):
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return None


class OwnerMigratesRouter:
    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return db == owner_alias()
