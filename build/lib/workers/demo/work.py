"""The demo's kinds and handlers, found by the queue's autodiscovery (``WORKQUEUE
["AUTODISCOVER_MODULE"]``): NOOP, and NOTIFY_SHIPMENT with the shipments it advances."""

from workers.demo import handler, kind, noop

__all__ = ["handler", "kind", "noop"]
