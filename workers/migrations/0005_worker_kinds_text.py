"""A worker's kinds as text: a worker serving many kinds lists them all (comma-separated), and
200 characters held about a dozen names, so its liveness row could not be written. From
varchar to text is a catalog change (no rewrite), on a table of one row per worker."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue_workers", "0004_rescue_turn"),
    ]

    operations = [
        migrations.AlterField(
            model_name="worker",
            name="kind",
            field=models.TextField(),
        ),
    ]
