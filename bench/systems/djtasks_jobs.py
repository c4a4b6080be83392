"""The no-op task for the `django-tasks-db` peer (import after django.setup())."""

import _common
from django.tasks import task


@task
def noop(seq: int) -> None:
    _common.record_wake(seq)
