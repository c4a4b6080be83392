"""The queue's minutes per kind (``workqueue_kindminute``: one row per minute, tenant, lane and
kind, under row-level security like the items): the oldest due pending item's wait and the
attempts' run times, for the gauges page's charts of oldest waiting by lane and kind and of run
time percentiles by kind. Written by the sweep on the system login, read by a tenant's staff.
Partitioned by day as the lanes' minutes are (``sql/schema/minutes_kinds_v1.sql``): the sweep
makes and drops a day's two partitions together."""

from django.db import migrations, models

import workqueue.models.minutes
from tenancy.rls import apply_tenant_policy
from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0026_history_timed"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The table as Django would make it, but partitioned, with the functions that keep
            # its days beside the lanes' minutes.
            database_operations=[run_sql_file(SQL_DIR / "schema", "minutes_kinds_v1")],
            state_operations=[
                migrations.CreateModel(
                    name="KindMinute",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "minute",
                                "org_id",
                                "lane",
                                "kind",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("minute", models.DateTimeField()),
                        ("org_id", models.UUIDField()),
                        ("lane", models.CharField(max_length=50)),
                        ("kind", models.CharField(max_length=100)),
                        ("oldest_wait_s", models.FloatField(null=True)),
                        ("runs", workqueue.models.minutes.IntegerArrayField()),
                    ],
                ),
            ],
        ),
        apply_tenant_policy("workqueue_kindminute"),
    ]
