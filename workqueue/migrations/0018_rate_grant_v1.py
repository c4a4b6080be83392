"""The function that grants a claim's picked items what their rate limits allow (``sql/schema/
rate_grant_v1.sql``): the claim's spending, moved out of its statement so that a claim none of
whose items falls under a limit does not start it."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0017_tenantshare_capped_idx"),
    ]

    operations = [run_sql_file(SQL_DIR / "schema", "rate_grant_v1")]
