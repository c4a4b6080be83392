from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The audit trail: append-only entries of who did what to which thing, per tenant."""

    name = "audit"
    label = "workqueue_audit"
    verbose_name = "Audit trail"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit.support import record
        from tenancy.support import support_seen

        # The support view begins only while this listens: each of its pages is an entry.
        support_seen.connect(record, dispatch_uid="workqueue_audit_support")
