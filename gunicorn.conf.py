"""gunicorn's settings for the reference site's web (read from the working directory).

Its own lines (``gunicorn.error``) and its access lines (``gunicorn.access``, one
``http_request`` event each) go through the queue's formatter, as text or as JSON
(``LOG_FORMAT``), like every other line of the site.
"""

from project.gunicorn_logs import logconfig_dict  # noqa: F401
