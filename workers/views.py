"""The web's operations endpoints (``workers/urls.py``; a site includes them with one line):

- ``/healthz``: 200 when the database answers and every migration is applied, 503 otherwise
  (JSON either way), for a load balancer's or a container's health check;
- ``/metrics``: this web process's own metrics (the queue's counters of what the admin and the
  API did here, and whatever else the site registers in prometheus_client's default registry).
  With ``PROMETHEUS_MULTIPROC_DIR`` set (prometheus_client's multiprocess mode, for a server
  of several processes) any process answers for them all;
- ``/metrics/queue``: the queue's global gauges (depth, oldest age per lane, dead letters,
  outbox lag, live workers), read from the database (``workers/gauges.py``): the one place they
  are exported. Every replica answers the same numbers; scrape it as one target.

Each answers GET and HEAD only, runs in no tenant's scope (``tenancy.middleware.tenant_free``:
it reads no tenant's rows) and needs no session. A site whose host check or SSL redirect stands
in a probe's way answers them before those, as the reference site's ``project/ops.py`` does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from tenancy.middleware import tenant_free
from workers import gauges

# Once every migration was applied, this process's code cannot need another one.
_migrated = False


def health() -> tuple[int, dict[str, object]]:
    """The status and body of ``/healthz``: the database answers on the default alias, and
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
    """This web's own metrics: every process's, summed, in prometheus_client's multiprocess
    mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def queue_metrics() -> bytes:
    return generate_latest(gauges.registry())


def _endpoint(view: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    # GET and HEAD only (405 naming them otherwise, not a CSRF refusal), in no tenant's scope.
    return tenant_free(csrf_exempt(require_safe(view)))


@_endpoint
def healthz(request: HttpRequest) -> HttpResponse:
    status, body = health()
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


@_endpoint
def metrics(request: HttpRequest) -> HttpResponse:
    return HttpResponse(process_metrics(), content_type=CONTENT_TYPE_LATEST)


@_endpoint
def queue_gauges(request: HttpRequest) -> HttpResponse:
    return HttpResponse(queue_metrics(), content_type=CONTENT_TYPE_LATEST)
