"""A worker's row may say ``stopping``: an operator's forced stop (the workers page), kept by the
worker's heartbeat and read back. Only the field's choices change: nothing in the database. A
worker of the release before this one does not know the state: its next beat writes its own
state over it, and the stop asks nothing of it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue_workers", "0006_worker_version"),
    ]

    operations = [
        migrations.AlterField(
            model_name="worker",
            name="state",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("draining", "Draining"),
                    ("stopping", "Stopping"),
                    ("offline", "Offline"),
                ],
                max_length=10,
            ),
        ),
    ]
