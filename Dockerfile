# One image for every process: the web server (default), a worker, or the sweep.
#   docker run IMAGE                                  # web on :8000
#   docker run IMAGE python manage.py runworker NOOP  # a worker (metrics and /healthz on :9100)
#   docker run IMAGE python manage.py sweep           # the sweep
# Settings come from the environment (.env.example); DATABASE_URL must name a real server.
FROM python:3.13-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DEBUG=false PORT=8000 \
    HEALTHCHECK_URL=http://127.0.0.1:8000/metrics
WORKDIR /app
RUN useradd --system --uid 10001 app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt gunicorn==23.*
COPY . .
RUN DATABASE_URL=postgres://build@localhost/build SECRET_KEY=build \
    python manage.py collectstatic --noinput --verbosity 0
USER app
EXPOSE 8000 9100
# The web answers on /metrics; a worker sets HEALTHCHECK_URL to its own /healthz.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(os.environ['HEALTHCHECK_URL'], timeout=2)"
CMD ["sh", "-c", "gunicorn project.wsgi --bind 0.0.0.0:${PORT} --workers 2"]
