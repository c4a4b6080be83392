"""Every attempt remembered: the attempts table (one row per settled claim: worker, host, start,
end, outcome, error, traceback), under row-level security like the items
(tenancy/sql/tenant_policy.sql), and the item's ``claimed_at`` (the start of its current
attempt, set by the claim). The SQL is frozen as applied: a change is a new migration."""

import django.db.models.functions.datetime
from django.db import migrations, models

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0003_cancel"),
    ]

    operations = [
        migrations.AddField(
            model_name="workitem",
            name="claimed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="Attempt",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("org_id", models.UUIDField()),
                ("item_id", models.UUIDField()),
                ("attempt", models.IntegerField()),
                ("worker", models.CharField(blank=True, default="", max_length=200)),
                ("host", models.CharField(blank=True, default="", max_length=200)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                (
                    "ended_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                (
                    "outcome",
                    models.CharField(
                        choices=[
                            ("done", "Done"),
                            ("retried", "Retried"),
                            ("dead_lettered", "Dead-lettered"),
                            ("lease_expired", "Lease expired"),
                        ],
                        max_length=20,
                    ),
                ),
                ("error", models.TextField(blank=True, default="")),
                ("traceback", models.TextField(blank=True, default="")),
            ],
            options={
                "indexes": [models.Index(fields=["item_id", "id"], name="attempt_item_idx")],
            },
        ),
        apply_tenant_policy("workqueue_attempt"),
    ]
