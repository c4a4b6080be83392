"""Rate limits: the limits an operator sets (global, the system login's only, like pauses: the
everyday login is granted nothing on either table), each bucket's theoretical arrival time the
claim statement keeps, and the item's ``rate_key`` (nullable, no default: adding it rewrites no
row)."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0009_holder_gone"),
    ]

    operations = [
        migrations.AddField(
            model_name="workitem",
            name="rate_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.CreateModel(
            name="RateBucket",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "limit_id",
                        "key",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("limit_id", models.BigIntegerField()),
                ("key", models.CharField(max_length=200)),
                ("tat", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["tat"], name="ratebucket_tat_idx")],
            },
        ),
        migrations.CreateModel(
            name="RateLimit",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                (
                    "scope",
                    models.CharField(
                        choices=[
                            ("kind", "Kind"),
                            ("lane", "Lane"),
                            ("tenant", "Tenant"),
                            ("key", "Key"),
                        ],
                        max_length=10,
                    ),
                ),
                ("target", models.CharField(max_length=200)),
                ("count", models.PositiveIntegerField()),
                ("period_s", models.PositiveIntegerField()),
                ("burst", models.PositiveIntegerField()),
                ("set_by", models.CharField(max_length=255)),
                (
                    "updated_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("scope", "target"), name="ratelimit_one_per_target"
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("burst__gte", 1), ("count__gte", 1), ("period_s__gte", 1)
                        ),
                        name="ratelimit_positive",
                    ),
                ],
            },
        ),
    ]
