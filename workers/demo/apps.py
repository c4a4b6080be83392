from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The example app the reference site installs (no other site gets it unless it asks):
    the NOOP kind, and a shipment notifier with its own records (shipments and their notices)
    beside its kind and handler, a page that books a shipment and emits its notice through the
    outbox in one transaction. A domain's tables live in its own app, not in the runtime."""

    name = "workers.demo"
    label = "workqueue_demo"
    verbose_name = "Demo: shipments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workqueue import runtime

        # A domain's own tenant rows go with its tenant's erase (the notices before the
        # shipments they point at), as any site's tables can.
        runtime.register_tenant_table("workqueue_demo_shipmentnotice", ("id",))
        runtime.register_tenant_table("workqueue_demo_shipment", ("id",))
