from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ProjectConfig(AppConfig):
    """The project's wiring: grants after migrate, tracing, the fail-closed login check."""

    name = "project"
    verbose_name = "Work queue project"

    def ready(self) -> None:
        from project import checks, gauges, grants, observability

        # Once per migrate (sender=self), after every app's tables exist.
        post_migrate.connect(grants.apply_grants, sender=self, dispatch_uid="project.apply_grants")
        checks.register()
        observability.configure_tracing()
        gauges.register()
