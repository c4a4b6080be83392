from django.apps import AppConfig


class WorkqueueConfig(AppConfig):
    """The work queue's items, their transitions, the admin's lists and triage, the enqueue API."""

    name = "workqueue"
    verbose_name = "Work queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from tenancy.roles import ensure_viewer_group
        from workqueue import checks

        # The read-only viewers' group, made after every migrate (idempotent).
        post_migrate.connect(ensure_viewer_group, sender=self, dispatch_uid="workqueue_viewers")

        # The settings and the database set-up, checked by every manage.py command; the
        # long-running ones (runworker, sweep) print the one line instead.
        checks.register()
