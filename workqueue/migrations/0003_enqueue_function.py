"""The one-statement enqueue (workqueue/sql/enqueue_function.sql)."""

from pathlib import Path

from django.db import migrations

from project.sql_files import run_sql_file

SQL = Path(__file__).resolve().parent.parent / "sql"


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0002_row_level_security")]

    operations = [
        run_sql_file(SQL, "enqueue_function"),
    ]
