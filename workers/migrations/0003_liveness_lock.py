"""A worker's liveness lock in its row: the key of the advisory lock it holds (NULL: none, an
older release, whose items wait for their lease) and when the sweep's rescue first saw that lock
free. Both nullable, no default to write: adding them rewrites nothing."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue_workers", "0002_schedules"),
    ]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="lock_key",
            field=models.BigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name="worker",
            name="lock_lost_at",
            field=models.DateTimeField(null=True),
        ),
    ]
