"""gunicorn's logging through the queue's formatter (``wqcore.logs``), from the environment.

gunicorn configures its loggers in its master, before Django's settings are read, so the
output is named here from ``LOG_FORMAT`` directly (the variable the site's ``WORKQUEUE`` reads).
"""

from __future__ import annotations

import os

_OUTPUT = os.environ.get("LOG_FORMAT", "text").strip() or "text"

logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"workqueue_item": {"()": "wqcore.logs.ItemFilter"}},
    "formatters": {"workqueue": {"()": "wqcore.logs.formatter", "output": _OUTPUT}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "workqueue",
            "filters": ["workqueue_item"],
            "stream": "ext://sys.stdout",
        },
        "error_console": {
            "class": "logging.StreamHandler",
            "formatter": "workqueue",
            "filters": ["workqueue_item"],
            "stream": "ext://sys.stderr",
        },
    },
    "root": {"level": "INFO", "handlers": []},
    "loggers": {
        "gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
        "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
    },
}
