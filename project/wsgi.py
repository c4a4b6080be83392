import os
import sys

from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

try:
    from django.core.wsgi import get_wsgi_application

    from wqcore.appname import name_connections

    name_connections("web")

    application = get_wsgi_application()

    # A web process on an unreachable database, or on a login that escapes row-level security,
    # refuses to start with one line (workqueue/checks.py) rather than serve.
    from workqueue.runtime import refuse_unsafe_start

    refuse_unsafe_start()
    # The check's sessions, on this thread: each request's thread opens its own (and a
    # preloading server forks after this), so they would sit idle for the process's life.
    from django.db import connections

    connections.close_all()
except ImproperlyConfigured as exc:
    # One line that says what to change (a wrong setting, the built-in SECRET_KEY with
    # DEBUG=false), not a traceback per server process; gunicorn stops on exit status 4
    # ("App failed to load") instead of starting the process again and again.
    print(f"error: {exc}", file=sys.stderr, flush=True)
    sys.exit(4)
