"""Done items leave the hot table for history (``sql/schema/history_v1.sql``): children of the
item table, one per span of time, that the sweep makes ahead, fills and drops whole. Nothing
moves here: the sweep's ``move_history`` step moves the done items already in the table, a
batch at a time, with workers running."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0021_edge_tenant_v1"),
    ]

    operations = [run_sql_file(SQL_DIR / "schema", "history_v1")]
