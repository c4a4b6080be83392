from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The audit trail: append-only entries of who did what to which thing, per tenant."""

    name = "audit"
    label = "workqueue_audit"
    verbose_name = "Audit trail"
    default_auto_field = "django.db.models.BigAutoField"
