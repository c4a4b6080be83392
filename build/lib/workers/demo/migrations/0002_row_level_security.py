"""Row-level security on shipments and their notices (tenancy/sql/tenant_policy.sql)."""

from django.db import migrations

from tenancy.rls import apply_tenant_policy


class Migration(migrations.Migration):
    dependencies = [("workqueue_demo", "0001_initial")]

    operations = [
        apply_tenant_policy("workqueue_demo_shipment"),
        apply_tenant_policy("workqueue_demo_shipmentnotice"),
    ]
