# One image for every process: the web server (the default command) or a worker. Only the
# runtime's lock goes in (requirements-runtime.txt, pinned with hashes): no test tools, no
# embedded server.
#   docker build -t workqueue .
#   docker run --env-file deploy.env -e ADMIN_DATABASE_URL=... workqueue python manage.py create_logins
#   docker run --env-file deploy.env -e ADMIN_DATABASE_URL=... workqueue python manage.py migrate --database admin
#   docker run --env-file deploy.env -p 8000:8000 workqueue
#   docker run --env-file deploy.env -e HEALTHCHECK_URL=http://127.0.0.1:9100/healthz workqueue \
#       python manage.py runworker NOOP,NOTIFY_SHIPMENT
# Settings come from the environment (deploy.env.example for production, .env.example for all of
# them); DATABASE_URL must name a real server (the embedded PostgreSQL of bin/run is a laptop's).
# The base: the official one by default; bin/image passes one made from Debian's packages
# where no image registry is reachable (the same layout: CPython 3.13 in /usr/local).
ARG BASE=python:3.13-slim
FROM ${BASE}

# A worker's /healthz and /metrics listen on every interface: the scraper comes from outside.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DEBUG=false PORT=8000 \
    STATIC_ROOT=/app/static HEALTHCHECK_URL=http://127.0.0.1:8000/healthz \
    WORKER_METRICS_HOST=0.0.0.0
WORKDIR /app
RUN useradd --system --uid 10001 --no-create-home app
COPY requirements-runtime.txt .
# Gettext's sources (Django's .po files, about 10 MB) are never read: only the compiled .mo files
# are.
RUN pip install --no-cache-dir --require-hashes -r requirements-runtime.txt \
    && find /usr/local/lib -name '*.po' -delete
# .dockerignore keeps the local venv, database, secrets, tests and caches out.
COPY . .
# The admin's CSS and scripts into STATIC_ROOT, which whitenoise serves (a build-only key: the
# real one comes with the container's environment).
RUN DATABASE_URL=postgres://build@localhost/build SECRET_KEY=collectstatic-at-build-time-only \
    python manage.py collectstatic --noinput --verbosity 0
USER 10001
EXPOSE 8000 9100
# The web answers /healthz (the database reachable, every migration applied); a worker sets
# HEALTHCHECK_URL to its own /healthz (its heartbeat).
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['HEALTHCHECK_URL'], timeout=2)"]
# gunicorn.conf.py: the bind (PORT), WEB_CONCURRENCY processes (2), the metrics of them all.
CMD ["gunicorn", "project.wsgi"]
