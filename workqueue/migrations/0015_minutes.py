"""The queue's minutes: the sweep's rollup of the attempts for the gauges page's charts
(``workqueue_laneminute``: one row per minute, tenant and lane, under row-level security like
the items, read by a tenant's staff; written on the system login), and how far it has read the
attempts (``workqueue_rollupstate``: global, the system login's only, like the mutex). The SQL
is frozen as applied: a change is a new migration."""

from django.db import migrations, models

import workqueue.models.minutes
from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0014_move_dependents_v2"),
    ]

    operations = [
        migrations.CreateModel(
            name="LaneMinute",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "minute",
                        "org_id",
                        "lane",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("minute", models.DateTimeField()),
                ("org_id", models.UUIDField()),
                ("lane", models.CharField(max_length=50)),
                ("done", models.IntegerField()),
                ("failed", models.IntegerField()),
                ("dead", models.IntegerField()),
                ("waits", workqueue.models.minutes.IntegerArrayField()),
                ("pending", models.IntegerField()),
            ],
        ),
        migrations.CreateModel(
            name="RollupState",
            fields=[
                ("name", models.CharField(max_length=50, primary_key=True, serialize=False)),
                ("through_id", models.BigIntegerField()),
                ("mark_id", models.BigIntegerField()),
                ("mark_snapshot", models.TextField()),
                ("marked_at", models.DateTimeField()),
                ("pending_minute", models.DateTimeField(null=True)),
            ],
        ),
        apply_tenant_policy("workqueue_laneminute"),
    ]
