"""Row-level security on orgs (an org is its own tenant: ``id``) and memberships
(tenancy/sql/tenant_policy.sql). The SQL is frozen as applied: a change is a new migration."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("workqueue_tenancy", "0001_initial")]

    operations = [
        apply_tenant_policy("workqueue_tenancy_org", column="id"),
        apply_tenant_policy("workqueue_tenancy_membership"),
    ]
