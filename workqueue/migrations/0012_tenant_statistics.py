"""Tell the planner that tenants are many: ``org_id`` has about one distinct value per hundred
rows, whatever the last ANALYZE sampled.

When one tenant holds nearly every waiting item (a bulk import), a sample sees one tenant, and
the planner then takes ``org_id = <tenant>`` to match every row: the fair claim's per-tenant
pick walked the lane's whole backlog through ``workitem_claim_idx`` to reach another tenant's
few items (200 ms per claim at a million waiting) instead of reading them from
``workitem_fair_claim_idx`` (0.03 ms). The SQL is frozen here, as every migration's is.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workqueue", "0011_mutex"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE workqueue_workitem ALTER COLUMN org_id SET (n_distinct = -0.01);"
            " ANALYZE workqueue_workitem (org_id);",
            "ALTER TABLE workqueue_workitem ALTER COLUMN org_id RESET (n_distinct);",
        ),
    ]
