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
        # Development only (refused unless DEBUG): run committed work in this process.
        from workers import eager

        eager.start()
        checks.register(_schedule_checks)
        checks.register(_unserved_kind_checks)


def _schedule_checks(**_: Any) -> list[checks.CheckMessage]:
    from workers.schedules import too_fine

    return [checks.Warning(line, id="workqueue_workers.W001") for line in too_fine()]


def _unserved_kind_checks(**_: Any) -> list[checks.CheckMessage]:
    """A warning for each kind registered here that no running worker declared, when workers
    run (none running is a deployment not started, not a kind forgotten): its items would wait
    silently. Nothing when the workers' table cannot be read (the database check says why)."""
    from django.db import DatabaseError

    from workers.liveness import read_live_kinds
    from workqueue.runtime import known_kinds

    try:
        served = read_live_kinds(wq_settings.GAUGES_WORKER_STALE_AFTER_S)
    except DatabaseError:
        return []
    if not served:
        return []
    return [
        checks.Warning(
            f"no running worker serves the kind {kind!r} (they serve {', '.join(sorted(served))})",
            hint="restart the workers (runworker with no kinds runs every handled kind) or "
            f"start one for it: manage.py runworker {kind}",
            id="workqueue_workers.W002",
        )
        for kind in known_kinds()
        if kind not in served
    ]
