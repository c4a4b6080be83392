"""The site's own @task, run by the queue's backend (TASKS in the site's settings)."""

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks package (the queue's [tasks] extra)
    from django_tasks import task

from shop.models import Order


@task
def order_count(prefix: str) -> int:
    return Order.objects.filter(number__startswith=prefix).count()
