"""The NOTIFY_SHIPMENT kind: tell a shipment's recipient about one version of it, once."""

from __future__ import annotations

import uuid

import pydantic

from workqueue.api import Kind, Payload, register


class NotifyShipmentPayload(Payload):
    """Tell the recipient a shipment moved, and advance the shipment's notified version."""

    shipment_id: uuid.UUID
    # The shipment's version this notice is about; the handler's compare-and-set uses it.
    version: int = pydantic.Field(ge=1)
    channel: str = pydantic.Field(default="email", pattern="^(email|sms)$")


NOTIFY_SHIPMENT = register(
    Kind(
        "NOTIFY_SHIPMENT",
        NotifyShipmentPayload,
        max_attempts=5,
        description="notify a shipment's recipient once per version",
    )
)
