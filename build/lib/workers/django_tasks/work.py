"""The DJANGO_TASK kind and its handler, found by the queue's autodiscovery."""

from workers.django_tasks import handler, kind

__all__ = ["handler", "kind"]
