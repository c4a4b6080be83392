"""Done items leave the hot table for history (``sql/schema/history_v1.sql``): children of the
item table, one per span of time, that the sweep makes ahead, fills and drops whole. Nothing
moves here: the sweep's ``move_history`` step moves the done items already in the table, a
batch at a time, with workers running.

The system login may call the functions from the moment they exist (``sql/grants.sql`` grants
the same again at every ``grant_logins``): a release's workers start after its ``migrate``, and a
rolling upgrade runs no ``grant_logins`` in between."""

from typing import Any

from django.conf import settings
from django.db import migrations
from psycopg import sql

from workqueue import SQL_DIR
from wqcore.conf import owner_alias, system_alias, tenant_alias
from wqcore.sqlfiles import run_sql_file


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
        ("workqueue", "0021_edge_tenant_v1"),
    ]

    operations = [
        run_sql_file(SQL_DIR / "schema", "history_v1"),
        migrations.RunPython(grant_to_the_system_login, migrations.RunPython.noop),
    ]
