"""Django's task API, wherever this Django keeps it: ``django.tasks`` (Django 6.0 and later),
else the django-tasks package (``django_tasks``: the same API for Django 5.2, installed by the
distribution's ``tasks`` extra). Every name of it the backend uses is imported here, and only
here; with neither present the app stops at start with one line naming the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import django
from django.core.exceptions import ImproperlyConfigured

try:
    from django.tasks import (
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
    from django.tasks.signals import (
        log_task_finished,
        log_task_started,
        task_enqueued,
        task_finished,
        task_started,
    )

    # The logger of each task's start and end.
    LOGGER_NAME = "django.tasks"
except ModuleNotFoundError as missing:
    # The type checker reads the branch of the locks' Django, which has django.tasks.
    if TYPE_CHECKING or missing.name != "django.tasks":
        raise
    else:
        try:
            from django_tasks import (
                DEFAULT_TASK_QUEUE_NAME,
                TaskContext,
                TaskResult,
                TaskResultStatus,
                default_task_backend,
                task,
                task_backends,
            )
        except ModuleNotFoundError as exc:
            if exc.name != "django_tasks":
                raise
            raise ImproperlyConfigured(
                "workers.django_tasks needs Django's task API, which Django "
                f"{django.get_version()} does not have: install the django-tasks package "
                "(pip install 'django-fenced-workqueue[tasks]'), "
                "or take 'workers.django_tasks' out of INSTALLED_APPS"
            ) from None
        # Django registers the backends' system checks as django.tasks is imported; the package
        # does it in its own app's ready(), which a site need not install: registered here.
        from django_tasks import checks as _checks  # noqa: F401
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskError
        from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist
        from django_tasks.signals import (
            log_task_finished,
            log_task_started,
            task_enqueued,
            task_finished,
            task_started,
        )

        LOGGER_NAME = "django_tasks"

__all__ = [
    "DEFAULT_TASK_QUEUE_NAME",
    "LOGGER_NAME",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "default_task_backend",
    "log_task_finished",
    "log_task_started",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
