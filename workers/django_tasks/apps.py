from django.apps import AppConfig


class DjangoTasksConfig(AppConfig):
    """The ``django.tasks`` backend's own table (each task's record), beside its kind and
    handler. The label is short and not ``django_tasks``, which the django-tasks backport uses."""

    name = "workers.django_tasks"
    label = "djtasks"
    verbose_name = "Django tasks"
    default_auto_field = "django.db.models.BigAutoField"
