"""The shipment notifier: tell a shipment's recipient about one version of it, once.

A ``NOTIFY_SHIPMENT`` item names a shipment, the version it announces and a channel. The
handler sends the notice and advances the shipment's ``notified_version`` in one transaction,
the advance being a compare-and-set on the shipment's ``version`` (the claim token
fences the queue row and row-level security the tenant; neither fences the record).
"""

from __future__ import annotations

from typing import Any

import pydantic
from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Now

from tenancy.contexts import OpContext
from tenancy.scope import tenant_scope
from workers.demo.kind import NOTIFY_SHIPMENT, NotifyShipmentPayload
from workers.demo.models import Shipment, ShipmentNotice
from workqueue.api import PermanentError, RetryableError, Run, WorkItem, handles


@handles(NOTIFY_SHIPMENT.name)
class NotifyShipmentHandler:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        """Send the notice for ``payload.version`` unless it went out already; then advance.

        - already notified of this version or a later one: return, sending nothing;
        - the shipment is missing (or another tenant's): ``PermanentError``;
        - the version is ahead of the shipment (its write has not landed yet), or the run was
          cancelled: ``RetryableError``, nothing sent;
        - the shipment changed between the read and the compare-and-set: ``RetryableError``
          after the side effect is marked, so the item is dead-lettered for a human; the
          notice is rolled back with the transaction.
        """
        try:
            payload = NotifyShipmentPayload.model_validate(item.payload)
        except pydantic.ValidationError as exc:
            raise PermanentError(f"payload: {exc.errors()[0]['msg']}") from None
        with tenant_scope(ctx.org_id) as using:
            shipments = Shipment.objects.using(using).filter(org_id=ctx.org_id)
            shipment = shipments.filter(pk=payload.shipment_id).first()
            if shipment is None:
                raise PermanentError(f"shipment {payload.shipment_id} not found")
            if shipment.notified_version >= payload.version:
                return
            if payload.version > shipment.version:
                raise RetryableError(
                    f"shipment {shipment.pk} is at version {shipment.version}, "
                    f"behind the notice's version {payload.version}"
                )
            if run.cancelled:
                raise RetryableError("cancelled")
            if not _send_notice(shipments, shipment, payload, using):
                return  # another run sent it and recorded it
            run.mark_side_effect()
            advanced = shipments.filter(pk=shipment.pk, version=shipment.version).update(
                notified_version=payload.version, version=F("version") + 1, updated_at=Now()
            )
            if advanced == 0:
                raise RetryableError(
                    f"shipment {shipment.pk} changed after version {shipment.version} was read"
                )


def _send_notice(
    shipments: Any, shipment: Shipment, payload: NotifyShipmentPayload, using: str
) -> bool:
    """Write the notice (the side effect, rolled back with the handler's transaction); False
    when another run sent it and the shipment records it already."""
    try:
        with transaction.atomic(using=using):
            ShipmentNotice.objects.using(using).create(
                org_id=shipment.org_id,
                shipment=shipment,
                version=payload.version,
                channel=payload.channel,
            )
        return True
    except IntegrityError:
        # Another run sent this notice and committed while this one was reading (or the
        # shipment was deleted meanwhile).
        latest = shipments.filter(pk=shipment.pk).first()
        if latest is None:
            raise PermanentError(f"shipment {shipment.pk} was deleted") from None
        if latest.notified_version >= payload.version:
            return False
        raise PermanentError(
            f"a {payload.channel} notice for shipment {shipment.pk} version "
            f"{payload.version} exists, but the shipment does not record it"
        ) from None
