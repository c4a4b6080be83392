"""Shipments and the notices sent about them: the records the shipment notifier advances."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models.functions import Now


class ShipmentStatus(models.TextChoices):
    # Booked; not yet handed to the carrier.
    CREATED = "created", "Created"
    # With the carrier, on its way.
    IN_TRANSIT = "in_transit", "In transit"
    # Handed to the recipient.
    DELIVERED = "delivered", "Delivered"
    # Could not be delivered; on its way back to the sender.
    RETURNED = "returned", "Returned"


class Channel(models.TextChoices):
    # The recipient's e-mail address.
    EMAIL = "email", "E-mail"
    # A text message.
    SMS = "sms", "SMS"


class Shipment(models.Model):
    """A parcel on its way to a recipient, in one tenant.

    ``version`` goes up by one with every change to the row; a write that depends on what it
    read is a compare-and-set on it (``filter(version=<read>).update(...)``), so a change made
    meanwhile is never overwritten. ``notified_version`` is the version the recipient was last
    told about (0: never).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org_id = models.UUIDField()
    reference = models.CharField(max_length=100)
    recipient_email = models.EmailField()
    status = models.CharField(
        max_length=20, choices=ShipmentStatus.choices, default=ShipmentStatus.CREATED
    )
    version = models.PositiveIntegerField(default=1)
    notified_version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org_id", "reference"], name="shipment_reference_unique"
            ),
            # Nobody is told about a version the shipment has not reached.
            models.CheckConstraint(
                condition=models.Q(notified_version__lte=models.F("version")),
                name="shipment_notified_version_reached",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reference} v{self.version} ({self.status})"


class ShipmentNotice(models.Model):
    """That the recipient was told about one version of a shipment, on one channel.

    It stands in for the e-mail gateway: sending a notice is inserting this row, and the unique
    constraint makes it one notice per shipment version and channel.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    org_id = models.UUIDField()
    shipment = models.ForeignKey(Shipment, on_delete=models.CASCADE, related_name="notices")
    version = models.PositiveIntegerField()
    channel = models.CharField(max_length=10, choices=Channel.choices)
    sent_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["shipment", "version", "channel"], name="shipment_notice_once"
            )
        ]

    def __str__(self) -> str:
        return f"notice {self.shipment_id} v{self.version} by {self.channel}"
