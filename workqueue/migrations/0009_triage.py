"""Triage in the admin: the discarded status, an index over dead letters (and discarded items)
by when they got there, and the dead-letter list's proxy."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0008_tenant_share_row_level_security")]

    operations = [
        migrations.AlterField(
            model_name="workitem",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("claimed", "Claimed"),
                    ("done", "Done"),
                    ("failed", "Failed"),
                    ("discarded", "Discarded"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="workitem",
            index=models.Index(
                condition=models.Q(("status__in", ["failed", "discarded"])),
                fields=["updated_at"],
                name="workitem_triage_idx",
            ),
        ),
        migrations.CreateModel(
            name="DeadLetter",
            fields=[],
            options={
                "verbose_name": "dead letter",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("workqueue.workitem",),
        ),
    ]
