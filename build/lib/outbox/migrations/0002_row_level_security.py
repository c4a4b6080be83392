"""Row-level security on outbox rows (tenancy/sql/tenant_policy.sql)."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("workqueue_outbox", "0001_initial")]

    operations = [
        apply_tenant_policy("workqueue_outbox_outboxrow"),
    ]
