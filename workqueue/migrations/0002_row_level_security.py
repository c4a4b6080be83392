"""Row-level security on work items (tenancy/sql/tenant_policy.sql)."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0001_initial")]

    operations = [apply_tenant_policy("workqueue_workitem")]
