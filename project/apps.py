from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.apps import AppConfig
from django.db import connections
from django.db.models.signals import post_migrate

SITE_GRANTS = Path(__file__).with_name("sql") / "site_grants.sql"


class ProjectConfig(AppConfig):
    """The reference site's wiring: the logins' grants after migrate (the queue's tables and
    Django's own), tracing, its hint for a database it cannot reach (the web's /metrics and
    /healthz: workers/urls.py, answered first by project/ops.py)."""

    name = "project"
    verbose_name = "Reference site"

    def ready(self) -> None:
        from project import checks, observability
        from workqueue.runtime import set_unreachable_hint

        # Once per migrate (sender=self), after every app's tables exist.
        post_migrate.connect(grant_logins, sender=self, dispatch_uid="project.grant_logins")
        set_unreachable_hint(checks.unreachable_hint)
        observability.configure_tracing()


def grant_logins(using: str = "admin", plan: Any = None, **kwargs: Any) -> None:
    """After a migrate as the owner: the queue's grants on its tables (tenancy.grants), then
    this site's on Django's own (``sql/site_grants.sql``: sign-in on the system login, the
    catalogs read-only to the everyday login). Not after a migrate backwards: this code names
    tables the older schema lacks; the grants wait for the code that matches it."""
    from psycopg import sql

    from tenancy.grants import apply_grants
    from wqcore.conf import owner_alias, system_alias, tenant_alias

    if using != owner_alias():
        return
    if any(backwards for _, backwards in plan or ()):
        out = kwargs.get("stdout") or sys.stdout
        out.write(
            "migrated backwards: the logins' grants are left as they were; deploy the code that"
            " matches this schema, then run manage.py grant_logins\n"
        )
        return
    apply_grants()
    logins = {
        "app": sql.Identifier(str(connections[tenant_alias()].settings_dict["USER"])),
        "system": sql.Identifier(str(connections[system_alias()].settings_dict["USER"])),
    }
    with connections[using].cursor() as cursor:
        cursor.execute(sql.SQL(SITE_GRANTS.read_text()).format(**logins).as_string())
