"""Django's task API (``django.tasks``: ``@task``, ``.enqueue()``, ``.get_result()``) on the work
queue: the backend for ``TASKS`` (``backend.py``), the ``DJANGO_TASK`` kind (``kind.py``) and
its handler (``handler.py``), and each task's record of attempts and outcome (``models.py``);
chains and groups of tasks, this queue's extension of the API (``workflows.py``, ``parents.py``).
See README.md here.

Nothing is imported here: this package is a Django app, imported before the models are ready.
"""
