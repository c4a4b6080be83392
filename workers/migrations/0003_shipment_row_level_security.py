"""Row-level security on the shipment notifier's tenant tables (tenancy/sql/tenant_policy.sql)."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("workers", "0002_shipments")]

    operations = [
        apply_tenant_policy("workers_shipment"),
        apply_tenant_policy("workers_shipmentnotice"),
    ]
