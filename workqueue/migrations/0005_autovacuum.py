"""Vacuum the queue table early (workqueue/sql/autovacuum.sql)."""

from pathlib import Path

from django.db import migrations

from project.sql_files import run_sql_file

SQL = Path(__file__).resolve().parent.parent / "sql"


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0004_item_ids_time_ordered")]

    operations = [
        run_sql_file(SQL, "autovacuum"),
    ]
