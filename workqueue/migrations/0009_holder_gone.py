"""An attempt's outcome may be ``holder_gone``: the sweep's rescue handed the item back because
its worker's liveness lock was free (the process gone), before its lease ran out. Choices only:
nothing changes in the database."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0008_progress"),
    ]

    operations = [
        migrations.AlterField(
            model_name="attempt",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("done", "Done"),
                    ("retried", "Retried"),
                    ("dead_lettered", "Dead-lettered"),
                    ("lease_expired", "Lease expired"),
                    ("holder_gone", "Holder gone"),
                ],
                max_length=20,
            ),
        ),
    ]
