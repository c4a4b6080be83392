"""Row-level security on the audit trail (tenancy/sql/tenant_policy.sql)."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("workqueue_audit", "0001_initial")]

    operations = [
        apply_tenant_policy("workqueue_audit_auditentry"),
    ]
