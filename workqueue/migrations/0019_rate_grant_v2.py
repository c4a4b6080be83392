"""The function the claim now calls to grant its picked items what their rate limits allow
(``sql/schema/rate_grant_v2.sql``): v1's grants, with a short path of its own where every item
falls in one bucket. v1 stays: v2 calls it for every other case, and a worker not yet upgraded
still calls it."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0018_rate_grant_v1"),
    ]

    operations = [run_sql_file(SQL_DIR / "schema", "rate_grant_v2")]
