"""The system login may call history's functions (migration 0022) from the migration on:
``sql/grants.sql`` grants the same again at every ``grant_logins``, but a release's workers start
after its ``migrate``, and a rolling upgrade runs no ``grant_logins`` in between."""

from typing import Any

from django.conf import settings
from django.db import migrations
from psycopg import sql

from wqcore.conf import owner_alias, system_alias, tenant_alias


def grant_to_the_system_login(apps: Any, schema_editor: Any) -> None:
    logins = {
        alias: settings.DATABASES[alias]["USER"]
        for alias in (owner_alias(), system_alias(), tenant_alias())
    }
    system = logins[system_alias()]
    if system in (logins[owner_alias()], logins[tenant_alias()]):
        return  # one login: it owns the functions, or row-level security is all it has
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [system])
        if cursor.fetchone() is None:
            return  # create_logins makes it, and its grants then include these
        login = sql.Identifier(system)
        cursor.execute(
            sql.SQL(
                "GRANT EXECUTE ON FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8),"
                " workqueue_history_move_v1(timestamptz, timestamptz, integer),"
                " workqueue_history_drop_v1(timestamptz) TO {}"
            ).format(login)
        )
        cursor.execute(
            sql.SQL(
                "GRANT SELECT ON workqueue_history_span, workqueue_history_follower TO {}"
            ).format(login)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0022_history"),
    ]

    operations = [migrations.RunPython(grant_to_the_system_login, migrations.RunPython.noop)]
