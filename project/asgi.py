import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
application = get_asgi_application()

# As project/wsgi.py: refuse to serve on a database set-up that would fail open.
from workqueue.runtime import refuse_unsafe_start  # noqa: E402

refuse_unsafe_start()
