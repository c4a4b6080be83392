"""Each worker's row says which release it runs (written by its heartbeat); a new column with a
default, added without a rewrite: a worker of the release before inserts without it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue_workers", "0005_worker_kinds_text"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="version",
            field=models.CharField(blank=True, db_default="", max_length=100),
        ),
    ]
