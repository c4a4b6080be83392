"""A rate bucket's ``free_at`` (when it allows one more: tat - (burst - 1) * interval), indexed in
place of ``tat``: the claim reads the buckets that allow nothing now, and no other. The buckets
already there get theirs from their limit (a bucket of no limit keeps now: it blocks nothing)."""

import django.db.models.functions.datetime
from django.db import migrations, models

FREE_AT = """
UPDATE workqueue_ratebucket b
   SET free_at = b.tat - make_interval(secs => (l.burst - 1) * l.period_s::float8 / l.count)
  FROM workqueue_ratelimit l
 WHERE l.id = b.limit_id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0010_rate_limits"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="ratebucket",
            name="ratebucket_tat_idx",
        ),
        migrations.AddField(
            model_name="ratebucket",
            name="free_at",
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.RunSQL(FREE_AT, reverse_sql=migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="ratebucket",
            index=models.Index(fields=["free_at"], name="ratebucket_free_at_idx"),
        ),
    ]
