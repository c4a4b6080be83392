from typing import Any

from django.apps import AppConfig
from django.conf import settings

BACKEND_PATH = "workers.django_tasks.backend.WorkQueueBackend"


class DjangoTasksConfig(AppConfig):
    """The ``django.tasks`` backend's own table (each task's record), beside its kind and
    handler. The label is ours (not ``django_tasks``, which the django-tasks backport uses)."""

    name = "workers.django_tasks"
    label = "workqueue_tasks"
    verbose_name = "Django tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A queue of this backend is a lane: declared, so the API accepts it and /metrics
        # names it (workqueue.lanes). A queue that is no lane name is the backend's check's.
        from workers.django_tasks.compat import DEFAULT_TASK_QUEUE_NAME
        from workqueue import runtime

        # A tenant's erase deletes its task records (those in history too, which the item
        # table's trigger does not reach).
        runtime.register_tenant_table("workqueue_tasks_taskrecord", ("item_id",))
        tasks: dict[str, Any] = getattr(settings, "TASKS", {})
        for params in tasks.values():
            if params.get("BACKEND") != BACKEND_PATH:
                continue
            for queue in params.get("QUEUES", [DEFAULT_TASK_QUEUE_NAME]):
                try:
                    runtime.declare_lanes(queue)
                except runtime.InvalidPayload:
                    pass
