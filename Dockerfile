# One image for every process: the web server (the default command) or a worker. Only the
# runtime's requirements go in (requirements-runtime.txt): no test tools, no embedded server.
#   docker build -t workqueue .
#   docker run -e DATABASE_URL=... -e ADMIN_DATABASE_URL=... workqueue python manage.py create_logins
#   docker run -e DATABASE_URL=... -e ADMIN_DATABASE_URL=... workqueue python manage.py migrate --database admin
#   docker run -e DATABASE_URL=... -e SECRET_KEY=... -p 8000:8000 workqueue
#   docker run -e DATABASE_URL=... -e HEALTHCHECK_URL=http://127.0.0.1:9100/healthz workqueue \
#       python manage.py runworker NOOP,NOTIFY_SHIPMENT
# Settings come from the environment (.env.example); DATABASE_URL must name a real server
# (the embedded PostgreSQL of bin/run is for a laptop, not an image).
FROM python:3.13-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DEBUG=false PORT=8000 \
    HEALTHCHECK_URL=http://127.0.0.1:8000/metrics
WORKDIR /app
RUN useradd --system --uid 10001 --no-create-home app
COPY requirements-runtime.txt .
RUN pip install --no-cache-dir -r requirements-runtime.txt
# .dockerignore keeps the local venv, database, secrets, tests and caches out.
COPY . .
RUN DATABASE_URL=postgres://build@localhost/build SECRET_KEY=build \
    python manage.py collectstatic --noinput --verbosity 0
USER 10001
EXPOSE 8000 9100
# The web answers on /metrics; a worker sets HEALTHCHECK_URL to its own /healthz.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['HEALTHCHECK_URL'], timeout=2)"]
CMD ["sh", "-c", "exec gunicorn project.wsgi --bind 0.0.0.0:${PORT} --workers 2"]
