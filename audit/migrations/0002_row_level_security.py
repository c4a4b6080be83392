"""Row-level security on the tenant tables of this app (tenancy/sql/tenant_policy.sql)."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [apply_tenant_policy("audit_auditentry")]
