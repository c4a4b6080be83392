"""The queue's minutes per kind (``workqueue_kindminute``: one row per minute, tenant, lane and
kind, under row-level security like the items): the oldest due pending item's wait and the
attempts' run times, for the gauges page's charts of oldest waiting by lane and kind and of run
time percentiles by kind. Written by the sweep on the system login, read by a tenant's staff."""

from django.db import migrations, models

import workqueue.models.minutes
from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0024_history_share_v2"),
    ]

    operations = [
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
        apply_tenant_policy("workqueue_kindminute"),
    ]
