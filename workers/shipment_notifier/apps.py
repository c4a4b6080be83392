from django.apps import AppConfig


class ShipmentNotifierConfig(AppConfig):
    """The shipment notifier's own records (shipments and their notices), beside its kind and
    handler: a domain's tables live in its own app, not in the workers runtime."""

    name = "workers.shipment_notifier"
    label = "shipment_notifier"
    verbose_name = "Shipments"
    default_auto_field = "django.db.models.BigAutoField"
