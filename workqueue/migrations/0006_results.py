"""Results: what an item's handler returned (JSON), written by the statement that completes it.
Nullable with no default, so adding it rewrites no row (PostgreSQL only notes the column)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0005_pauses_and_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="workitem",
            name="result",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
