"""The reference site's settings with Django's default logging, as a site that writes no
``LOGGING`` has it: the ``django`` logger mails ``ADMINS`` every ERROR when DEBUG is off. The
mail goes to files in ``TEST_MAIL_DIR`` (tests/runtime/test_worker_mail.py)."""

from __future__ import annotations

import os

import django

from project.settings import *  # noqa: F403

LOGGING: dict[str, object] = {}  # Django's DEFAULT_LOGGING alone
# Django 6 takes addresses; 5.2 (name, address) pairs.
ADMINS = ["ops@example.com"] if django.VERSION >= (6,) else [("Ops", "ops@example.com")]
EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
EMAIL_FILE_PATH = os.environ["TEST_MAIL_DIR"]
