from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
    verbose_name = "Workers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Each worker package registers its handlers on import (workers/<worker>/handler.py).
        for package in pkgutil.iter_modules([str(Path(__file__).parent)]):
            if package.ispkg and (Path(__file__).parent / package.name / "handler.py").exists():
                importlib.import_module(f"workers.{package.name}.handler")
