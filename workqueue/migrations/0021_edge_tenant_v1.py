"""An edge joins two items of the tenant it is written in (``sql/schema/edge_tenant_v1.sql``):
the statement that writes one refuses it otherwise, where row-level security checked only the
tenant the edge names."""

from django.db import migrations

from workqueue import SQL_DIR
from wqcore.sqlfiles import run_sql_file


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0020_ready_ring"),
    ]

    operations = [run_sql_file(SQL_DIR / "schema", "edge_tenant_v1")]
