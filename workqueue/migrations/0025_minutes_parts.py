"""The gauges page's minutes partitioned by day (``sql/schema/minutes_parts_v1.sql``): the
sweep drops a whole day once past ``ROLLUP_RETENTION_S`` instead of deleting its rows. The
table as it was becomes the partition of the days before the day after tomorrow; the row-level
security of the new table is the tenant policy every tenant table carries."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy
from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file

POLICY = apply_tenant_policy("workqueue_laneminute")


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0024_history_share_v2"),
    ]

    operations = [
        # Unapplied last: the plain table the reverse makes takes the tenant policy again.
        migrations.RunSQL(migrations.RunSQL.noop, reverse_sql=POLICY.sql),
        run_sql_file(SQL_DIR / "schema", "minutes_parts_v1"),
        POLICY,
    ]
