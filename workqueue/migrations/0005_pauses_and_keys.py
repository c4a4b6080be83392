"""Pauses and concurrency keys: the pause table the claim reads (lanes and kinds an operator
paused), the items' concurrency key, the unique index that lets one item per (tenant, key) be
claimed at a time, and the index the claim finds a key's first waiting item by. No row-level
security on the pause table: it is global, the system login's only (the everyday login is
granted nothing on it)."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0004_attempts"),
    ]

    operations = [
        migrations.CreateModel(
            name="Pause",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("lane", models.CharField(max_length=50)),
                ("kind", models.CharField(blank=True, default="", max_length=100)),
                ("paused_by", models.CharField(max_length=255)),
                ("reason", models.CharField(blank=True, default="", max_length=500)),
                (
                    "paused_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
        ),
        migrations.AddField(
            model_name="workitem",
            name="concurrency_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddIndex(
            model_name="workitem",
            index=models.Index(
                condition=models.Q(("concurrency_key__isnull", False), ("status", "pending")),
                fields=["org_id", "concurrency_key", "-priority", "available_at", "id"],
                name="workitem_key_waiting_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="workitem",
            constraint=models.UniqueConstraint(
                condition=models.Q(("concurrency_key__isnull", False), ("status", "claimed")),
                fields=("org_id", "concurrency_key"),
                name="workitem_one_claimed_per_key",
            ),
        ),
        migrations.AddConstraint(
            model_name="pause",
            constraint=models.UniqueConstraint(
                fields=("lane", "kind"), name="pause_one_per_lane_and_kind"
            ),
        ),
    ]
