"""Where the sign-in tables are read and written: on the system login, never the everyday one.

Users, groups, permissions, sessions and the admin's own change log belong to no tenant, and
signing in is how a request finds out its tenant, so no tenant can be named while reading them.
They are routed to the system login, and the everyday login holds no right on them at all
(``project/sql/grants.sql``): SQL run as the everyday login, scoped to one tenant, can neither
read another tenant's users (their password hashes) or session keys nor change them. A tenant's
own people are read through ``Membership``, which row-level security fences.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model

from tenancy.scope import SYSTEM_ALIAS

# app_label.model_name, lower case; the m2m tables between them follow their models.
SIGN_IN_MODELS = frozenset(
    {
        "tenancy.user",
        "tenancy.user_groups",
        "tenancy.user_user_permissions",
        "auth.group",
        "auth.group_permissions",
        "auth.permission",
        "sessions.session",
        "admin.logentry",
    }
)


def _is_sign_in(model: type[Model]) -> bool:
    return model._meta.label_lower in SIGN_IN_MODELS


class SignInRouter:
    """Routes the sign-in models to the system login; has no opinion on any other model."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return SYSTEM_ALIAS if _is_sign_in(model) else None

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return SYSTEM_ALIAS if _is_sign_in(model) else None

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        # A membership (read on the everyday login) points at its user (read on the system
        # login): two logins, one database.
        if _is_sign_in(type(obj1)) or _is_sign_in(type(obj2)):
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return None
