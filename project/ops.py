"""The web's operations endpoints and its request metrics, in one middleware first in the chain.

- ``/healthz``: 200 when the database answers and every migration is applied, 503 otherwise
  (JSON either way); the image's HEALTHCHECK polls it.
- ``/metrics``: this web's own metrics (requests, the queue's transition counters done here).
  Under gunicorn with ``PROMETHEUS_MULTIPROC_DIR`` set (``gunicorn.conf.py`` sets it) every
  process writes its samples to that folder and any process answers for all of them, so a
  counter never goes backwards whichever process a scrape reaches.
- ``/metrics/queue``: the queue's global gauges (depth, oldest age per lane, dead letters,
  outbox lag, live workers), read from the database: the one place they are exported
  (README, "Metrics"). Every replica answers the same numbers; scrape it as one target.

They answer before the host check, the SSL redirect and the sessions: a health check or a
scrape reaches the container by its address (not an ``ALLOWED_HOSTS`` name) over plain HTTP
inside the network, and must not touch a session.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from workers import gauges

REQUESTS = Counter(
    "workqueue_web_requests_total", "Requests the web answered.", ["method", "status"]
)
REQUEST_SECONDS = Histogram(
    "workqueue_web_request_seconds",
    "Time the web took to answer a request.",
    ["method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
# Bounded labels: any other method a client makes up is one series.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

OPS_PATHS = frozenset({"/healthz", "/metrics", "/metrics/queue"})
# Once every migration was applied, this process's code cannot need another one.
_migrated = False


def health() -> tuple[int, dict[str, object]]:
    """The status and body of ``/healthz``: the database answers on the everyday login, and
    no migration of this code is left to apply."""
    global _migrated
    body: dict[str, object] = {"database": "ok", "migrations": "applied"}
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        if not _migrated:
            executor = MigrationExecutor(connection)
            unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
            if unapplied:
                body["migrations"] = f"{len(unapplied)} unapplied: run manage.py migrate"
            else:
                _migrated = True
    except Exception as exc:  # any failure is the answer, not a 500
        text = str(exc).strip()
        body["database"] = text.splitlines()[0] if text else type(exc).__name__
        # A broken connection is not kept for the next request.
        try:
            connection.close()
        except Exception:
            pass
    healthy = body["database"] == "ok" and body["migrations"] == "applied"
    body["healthy"] = healthy
    return (200 if healthy else 503), body


def process_metrics() -> bytes:
    """This web's own metrics: every gunicorn process's, summed, in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def queue_metrics() -> bytes:
    return generate_latest(gauges.registry())


class OpsMiddleware:
    """Answers the three endpoints; times and counts every other request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if path in OPS_PATHS and request.method not in ("GET", "HEAD"):
            return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
        if path == "/healthz":
            status, body = health()
            return HttpResponse(json.dumps(body), status=status, content_type="application/json")
        if path == "/metrics":
            return HttpResponse(process_metrics(), content_type=CONTENT_TYPE_LATEST)
        if path == "/metrics/queue":
            return HttpResponse(queue_metrics(), content_type=CONTENT_TYPE_LATEST)
        started = time.perf_counter()
        response = self.get_response(request)
        method = request.method if request.method in _METHODS else "other"
        REQUEST_SECONDS.labels(method).observe(time.perf_counter() - started)
        REQUESTS.labels(method, str(response.status_code)).inc()
        return response
