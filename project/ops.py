"""The web's operations endpoints, answered first of all, and its request metrics, in one
middleware first in the chain.

``/healthz``, ``/metrics`` and ``/metrics/queue`` are the apps' own (``workers/urls.py``, the
module a site includes; what each answers: ``workers/views.py``). Here they are resolved against
that module and answered before the host check, the SSL redirect and the sessions: a health
check or a scrape reaches the container by its address (not an ``ALLOWED_HOSTS`` name) over
plain HTTP inside the network, and must not touch a session. Under gunicorn,
``gunicorn.conf.py`` sets ``PROMETHEUS_MULTIPROC_DIR``, so any process answers ``/metrics`` for
them all. Every other request is timed and counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from prometheus_client import Counter, Histogram

OPS_URLCONF = "workers.urls"

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


class OpsMiddleware:
    """Answers the three endpoints; times and counts every other request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            match = resolve(request.path_info, urlconf=OPS_URLCONF)
        except Resolver404:
            pass
        else:
            # The URLconf's views are typed, its resolver is not: their answer, as declared.
            answered: HttpResponse = match.func(request, *match.args, **match.kwargs)
            return answered
        started = time.perf_counter()
        response = self.get_response(request)
        method = request.method if request.method in _METHODS else "other"
        REQUEST_SECONDS.labels(method).observe(time.perf_counter() - started)
        REQUESTS.labels(method, str(response.status_code)).inc()
        return response
