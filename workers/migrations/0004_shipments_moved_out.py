"""The shipment models now live in their own app (``shipment_notifier``, whose 0001 renamed
the tables): drop them from this app's state only."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("workers", "0003_shipment_row_level_security"),
        ("shipment_notifier", "0001_take_over_shipments"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ShipmentNotice"),
                migrations.DeleteModel(name="Shipment"),
            ],
            database_operations=[],
        )
    ]
