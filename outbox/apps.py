from django.apps import AppConfig


class OutboxConfig(AppConfig):
    """The outbox: rows written in a domain change's own transaction, relayed afterwards."""

    name = "outbox"
    label = "workqueue_outbox"
    verbose_name = "Outbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workqueue import runtime

        # Erasing a tenant deletes its outbox rows first: a pending one would be relayed into a
        # new item while the erase runs. A work row's payload is its item's: a subject's erase
        # redacts it too.
        runtime.register_tenant_table(
            "workqueue_outbox_outboxrow", ("id",), before_items=True, kind_prefix="work."
        )
