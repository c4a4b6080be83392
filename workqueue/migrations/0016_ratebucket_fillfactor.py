"""A rate bucket's pages kept half empty (fillfactor 50): the claim rewrites a bucket's ``tat``
each time it spends from it, and with room on the row's page each rewrite is a HOT update (no
index entry written; the claim leaves ``free_at``, the one indexed column it writes, as it was
unless the bucket is left empty). The pages already written keep what they hold until their
rows move."""

from django.db import migrations

FILLFACTOR = "ALTER TABLE workqueue_ratebucket SET (fillfactor = 50)"
RESET = "ALTER TABLE workqueue_ratebucket RESET (fillfactor)"


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0015_minutes"),
    ]

    operations = [migrations.RunSQL(FILLFACTOR, reverse_sql=RESET)]
