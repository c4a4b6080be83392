"""The rescue timers' turn: one row saying when a timer last looked for gone workers (and how
many workers held a lock then), so the fleet's timers look about once an interval between them,
not once each. Written by the look's
own statement (an upsert): no row to seed."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue_workers", "0003_liveness_lock"),
    ]

    operations = [
        migrations.CreateModel(
            name="RescueTurn",
            fields=[
                ("id", models.SmallIntegerField(primary_key=True, serialize=False)),
                ("looked_at", models.DateTimeField()),
                ("workers", models.IntegerField()),
            ],
        ),
    ]
