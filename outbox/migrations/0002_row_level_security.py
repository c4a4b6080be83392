"""Row-level security on outbox rows (tenancy/sql/tenant_policy.sql)."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("outbox", "0001_outbox_rows")]

    operations = [apply_tenant_policy("outbox_outboxrow")]
