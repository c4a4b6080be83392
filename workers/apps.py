from __future__ import annotations

import importlib
from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from wqcore.conf import wq_settings


class WorkersConfig(AppConfig):
    """The workers runtime (``manage.py runworker``, ``manage.py sweep``) and the workers' own
    rows (each process's liveness)."""

    name = "workers"
    label = "workqueue_workers"
    verbose_name = "Workers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Kinds and handlers live with their apps: each installed app's ``work`` module
        # (WORKQUEUE["AUTODISCOVER_MODULE"]) registers them on import, in every process, so a
        # web process can enqueue them and a worker run them.
        autodiscover_modules(wq_settings.AUTODISCOVER_MODULE)
        # Modules outside any installed app (a script's, a test's): WORKQUEUE["HANDLER_MODULES"].
        for module in wq_settings.HANDLER_MODULES:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ImproperlyConfigured(
                    f"WORKQUEUE['HANDLER_MODULES'] names {module!r}, which cannot be imported "
                    f"({exc})"
                ) from None
        # Schedules are declared beside their kinds: checked once every module above is loaded,
        # so a bad one stops the process at start, in one line naming it.
        from workers.schedules import check_declarations

        check_declarations()
        checks.register(_schedule_checks)


def _schedule_checks(**_: Any) -> list[checks.CheckMessage]:
    from workers.schedules import too_fine

    return [checks.Warning(line, id="workqueue_workers.W001") for line in too_fine()]
