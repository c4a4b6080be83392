"""Minimal Django settings for the `django-tasks-db` peer (see django-tasks-db.py).

BENCH_DSN picks the database; BENCH_CONN_MAX_AGE is "0" (Django's default: a new
connection per worker loop) or "none" (persistent connections).
"""

import os
from urllib.parse import unquote, urlsplit

_url = urlsplit(os.environ["BENCH_DSN"])
_max_age = os.environ.get("BENCH_CONN_MAX_AGE", "0")

SECRET_KEY = "bench-only"
DEBUG = False  # DEBUG=True would keep every query in memory
USE_TZ = True
INSTALLED_APPS = ["django_tasks_db"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": unquote(_url.username or ""),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
        "CONN_MAX_AGE": None if _max_age.lower() == "none" else int(_max_age),
    }
}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
