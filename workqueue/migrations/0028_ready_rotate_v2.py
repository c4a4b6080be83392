"""Version 2 of the ready ring's rotation (``sql/schema/ready_v2.sql``): a slot holding a
backlog (more than ``READY_COMPACT_MAX_ROWS`` pending items) is emptied all the same once its
claims have left more dead rows in it than it still holds, so a backlog beside a held snapshot
no longer slows every claim until it never drains. A function only: nothing is rewritten, no
lock on a table. Version 1 stays for the workers of the release before."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0027_kindminute"),
    ]

    operations = [run_sql_file(SQL_DIR / "schema", "ready_v2")]
