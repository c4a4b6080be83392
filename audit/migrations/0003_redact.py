"""The one narrow path by which an audit entry changes: its data redacted, its skeleton kept
(``sql/schema/redact_v1.sql``), for erasing a tenant or one person's data. The logins still
may not UPDATE the trail; the system login may call this function."""

from pathlib import Path

from django.db import migrations

from wqcore.sqlfiles import run_sql_file

SCHEMA = Path(__file__).resolve().parent.parent / "sql" / "schema"


class Migration(migrations.Migration):
    dependencies = [("workqueue_audit", "0002_row_level_security")]

    operations = [run_sql_file(SCHEMA, "redact_v1")]
