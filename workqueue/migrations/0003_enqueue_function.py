"""The one-statement enqueue (workqueue/sql/enqueue_function.sql)."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "sql"


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0002_row_level_security")]

    operations = [
        migrations.RunSQL(
            (SQL / "enqueue_function.sql").read_text(),
            reverse_sql=(SQL / "enqueue_function_reverse.sql").read_text(),
        )
    ]
