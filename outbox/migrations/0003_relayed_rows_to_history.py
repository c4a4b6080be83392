"""Relayed outbox rows go to history by when they were relayed
(``workqueue/sql/schema/history_timed_v1.sql``): the sweep moves them out of the outbox table a
minute after, and drops them with their span's child once past ``OUTBOX_RETENTION_S``."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue_outbox", "0002_row_level_security"),
        ("workqueue", "0026_history_timed"),
    ]

    operations = [
        migrations.RunSQL(
            "INSERT INTO workqueue_history_timed (relname, time_column, finished)"
            " VALUES ('workqueue_outbox_outboxrow', 'relayed_at', 'status = ''relayed''');"
            " SELECT workqueue_history_timed_kids_v1();",
            reverse_sql="SELECT workqueue_history_untime_v1('workqueue_outbox_outboxrow');",
        )
    ]
