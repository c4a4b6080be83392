import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
application = get_wsgi_application()

# A web process on an unreachable database, or on a login that escapes row-level security,
# refuses to start with one line (workqueue/checks.py) rather than serve.
from workqueue.checks import refuse_unsafe_start  # noqa: E402

refuse_unsafe_start()
