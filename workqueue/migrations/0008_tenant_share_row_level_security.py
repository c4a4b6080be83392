"""Row-level security on tenant shares (tenancy/sql/tenant_policy.sql): a tenant may read its
own share; only the operator (system login) sets one."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0007_fair_claim")]

    operations = [apply_tenant_policy("workqueue_tenantshare")]
