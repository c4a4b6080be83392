from django.apps import AppConfig


class OutboxConfig(AppConfig):
    """The outbox: rows written in a domain change's own transaction, relayed afterwards."""

    name = "outbox"
    label = "workqueue_outbox"
    verbose_name = "Outbox"
    default_auto_field = "django.db.models.BigAutoField"
