"""Tables whose finished rows go to history by a time of their own
(``sql/schema/history_timed_v1.sql``): the API's stored answers here, the relayed outbox rows
by the outbox app's migration. Nothing moves here: the sweep moves what is already there, a
batch at a time, with workers running."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0025_minutes_parts"),
    ]

    operations = [
        # Unapplied last: the share function's body as it was (v2), children of timed tables gone.
        migrations.RunSQL(
            migrations.RunSQL.noop,
            reverse_sql=(SQL_DIR / "schema" / "history_share_v2.sql").read_text(),
        ),
        run_sql_file(SQL_DIR / "schema", "history_timed_v1"),
    ]
