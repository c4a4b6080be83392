"""Vacuum the queue table early (workqueue/sql/autovacuum.sql)."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "sql"


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0004_item_ids_time_ordered")]

    operations = [
        migrations.RunSQL(
            (SQL / "autovacuum.sql").read_text(),
            reverse_sql=(SQL / "autovacuum_reverse.sql").read_text(),
        )
    ]
