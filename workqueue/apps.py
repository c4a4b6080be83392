from django.apps import AppConfig


class WorkqueueConfig(AppConfig):
    name = "workqueue"
    verbose_name = "Work queue"
    default_auto_field = "django.db.models.BigAutoField"
