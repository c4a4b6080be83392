"""The shipment notifier takes over its tables from the workers runtime app.

Until now the shipment tables lived in the ``workers`` app (migrations 0002 and 0003 there);
a domain's records belong in its own app. The tables are renamed to this app's names (their
row-level security policies follow a rename), and the models move in Django's state only.
"""

import uuid

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

FORWARD = """
ALTER TABLE workers_shipment RENAME TO shipment_notifier_shipment;
ALTER TABLE workers_shipmentnotice RENAME TO shipment_notifier_shipmentnotice;
"""

REVERSE = """
ALTER TABLE shipment_notifier_shipment RENAME TO workers_shipment;
ALTER TABLE shipment_notifier_shipmentnotice RENAME TO workers_shipmentnotice;
"""


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("tenancy", "0002_row_level_security"),
        ("workers", "0003_shipment_row_level_security"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, reverse_sql=REVERSE)],
            state_operations=[
                migrations.CreateModel(
                    name="Shipment",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("reference", models.CharField(max_length=100)),
                        ("recipient_email", models.EmailField(max_length=254)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("created", "Created"),
                                    ("in_transit", "In transit"),
                                    ("delivered", "Delivered"),
                                    ("returned", "Returned"),
                                ],
                                default="created",
                                max_length=20,
                            ),
                        ),
                        ("version", models.PositiveIntegerField(default=1)),
                        ("notified_version", models.PositiveIntegerField(default=0)),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now(), editable=False
                            ),
                        ),
                        (
                            "updated_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "org",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="tenancy.org",
                            ),
                        ),
                    ],
                ),
                migrations.CreateModel(
                    name="ShipmentNotice",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("version", models.PositiveIntegerField()),
                        (
                            "channel",
                            models.CharField(
                                choices=[("email", "E-mail"), ("sms", "SMS")], max_length=10
                            ),
                        ),
                        (
                            "sent_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now(), editable=False
                            ),
                        ),
                        (
                            "org",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="tenancy.org",
                            ),
                        ),
                        (
                            "shipment",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="notices",
                                to="shipment_notifier.shipment",
                            ),
                        ),
                    ],
                ),
                migrations.AddConstraint(
                    model_name="shipment",
                    constraint=models.UniqueConstraint(
                        fields=("org", "reference"), name="shipment_reference_unique"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="shipment",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("notified_version__lte", models.F("version"))),
                        name="shipment_notified_version_reached",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="shipmentnotice",
                    constraint=models.UniqueConstraint(
                        fields=("shipment", "version", "channel"), name="shipment_notice_once"
                    ),
                ),
            ],
        )
    ]
