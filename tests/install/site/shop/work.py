"""The site's own kind and handler, found by the queue's autodiscovery (<app>.work)."""

from shop.models import Order
from workqueue.api import Kind, Payload, PermanentError, handles, register


class ReceiptPayload(Payload):
    order: str


SEND_RECEIPT = register(Kind("SHOP_SEND_RECEIPT", ReceiptPayload, max_attempts=2))


@handles(SEND_RECEIPT.name)
class SendReceipt:
    def handle(self, ctx, item, run):  # type: ignore[no-untyped-def]
        updated = Order.objects.filter(number=item.payload["order"]).update(paid=True)
        if not updated:
            raise PermanentError(f"no order {item.payload['order']}")
