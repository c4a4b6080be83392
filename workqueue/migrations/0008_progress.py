"""Progress and metadata: what a running handler reports (``run.progress``, ``run.set_meta``),
written by its worker under the claim token. ``progress`` is NULL until the first report;
``meta`` is an object from the start (each report merges into it: ``jsonb ||``), so every
existing item gets ``{}``. Neither column is indexed: a progress write changes no indexed
column, so PostgreSQL can make it a HOT update."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0006_results")]

    operations = [
        migrations.AddField(
            model_name="workitem",
            name="progress",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workitem",
            name="meta",
            field=models.JSONField(
                blank=True,
                db_default=models.Value({}, models.JSONField()),
                default=dict,
            ),
        ),
    ]
