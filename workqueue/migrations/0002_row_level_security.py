"""Row-level security on the queue's tenant tables (tenancy/sql/tenant_policy.sql), and the
queue table's storage settings. The SQL is frozen as applied: a change is a new migration.

Autovacuum: a queue table turns over all its rows; vacuum it after 1% of them died instead of
PostgreSQL's default 20%, so dead entries from claims and completions do not pile up in the
claim's index between runs (every claim reads past them until autovacuum runs).

Tenants are many: ``org_id`` has about one distinct value per hundred rows, whatever the last
ANALYZE sampled. When one tenant holds nearly every waiting item (a bulk import), a sample sees
one tenant, and the planner then takes ``org_id = <tenant>`` to match every row: the fair
claim's per-tenant pick walked the lane's whole backlog through ``workitem_claim_idx`` to reach
another tenant's few items (a read that grows with the backlog) instead of reading just them
from ``workitem_fair_claim_idx``."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy

STORAGE = """
-- storage: vacuum and analyze the queue table early; tell the planner its tenants are many.
ALTER TABLE workqueue_workitem SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
);
ALTER TABLE workqueue_workitem ALTER COLUMN org_id SET (n_distinct = -0.01);
"""

STORAGE_REVERSE = """
-- storage_reverse: back to the server's defaults.
ALTER TABLE workqueue_workitem ALTER COLUMN org_id RESET (n_distinct);
ALTER TABLE workqueue_workitem RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor
);
"""


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0001_initial")]

    operations = [
        apply_tenant_policy("workqueue_workitem"),
        apply_tenant_policy("workqueue_tenantshare"),
        apply_tenant_policy("workqueue_storedresponse"),
        migrations.RunSQL(STORAGE, reverse_sql=STORAGE_REVERSE),
    ]
