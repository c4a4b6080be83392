"""The enqueue API's stored responses (``Idempotency-Key``): a tenant table under row-level
security (tenancy/sql/tenant_policy.sql)."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

import workqueue.models
from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [
        ("tenancy", "0003_org_row_level_security"),
        ("workqueue", "0009_triage"),
    ]

    operations = [
        migrations.CreateModel(
            name="StoredResponse",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=workqueue.models.new_item_id,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("user_id", models.UUIDField()),
                ("key", models.CharField(max_length=200)),
                ("fingerprint", models.CharField(max_length=64)),
                ("status_code", models.SmallIntegerField(blank=True, null=True)),
                ("body", models.JSONField(blank=True, null=True)),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), editable=False
                    ),
                ),
                (
                    "org",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="tenancy.org",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["created_at"], name="storedresponse_created_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("org", "user_id", "key"), name="storedresponse_one_per_key"
                    )
                ],
            },
        ),
        apply_tenant_policy("workqueue_storedresponse"),
    ]
