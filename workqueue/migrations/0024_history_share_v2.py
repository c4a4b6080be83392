"""A history child's only rights are the sweep's, which moves rows into it
(``sql/schema/history_share_v2.sql``): the everyday login could insert into a child by name,
outside the hot table's unique key. Every reader reaches history through the item table."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0023_history_grants"),
    ]

    operations = [run_sql_file(SQL_DIR / "schema", "history_share_v2")]
