from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class WorkersConfig(AppConfig):
    name = "workers"
    verbose_name = "Workers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Each worker package registers its kind and handler on import
        # (workers/<worker>/handler.py), in every process, so a web process can enqueue them.
        for package in pkgutil.iter_modules([str(Path(__file__).parent)]):
            if package.ispkg and (Path(__file__).parent / package.name / "handler.py").exists():
                importlib.import_module(f"workers.{package.name}.handler")
        # Handlers that live outside workers/ (an app of the site's own): WORKER_HANDLER_MODULES.
        for module in getattr(settings, "WORKER_HANDLER_MODULES", []):
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ImproperlyConfigured(
                    f"WORKER_HANDLER_MODULES names {module!r}, which cannot be imported ({exc})"
                ) from None
