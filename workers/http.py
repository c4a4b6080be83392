"""The worker's HTTP endpoint: /healthz from the in-memory heartbeat, /metrics for Prometheus."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from workers.liveness import Liveness

logger = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    """``/healthz`` from the worker's beat in memory, ``/metrics`` from its registry."""

    liveness: Liveness  # set on the class made for each server (``serve``)

    def do_GET(self) -> None:
        try:
            self._answer()
        finally:
            # Each request runs on a thread of its own: a gauge read's connection ends here.
            connections.close_all()

    def _answer(self) -> None:
        if self.path == "/healthz":
            liveness = self.liveness
            healthy = liveness.healthy()
            body = json.dumps(
                {
                    "worker": liveness.worker_id,
                    "state": liveness.state,
                    "healthy": healthy,
                    "beat_age_s": liveness.age_s(),
                }
            ).encode()
            self._send(200 if healthy else 503, "application/json", body)
        elif self.path == "/metrics":
            self._send(200, CONTENT_TYPE_LATEST, generate_latest())
        else:
            self._send(404, "text/plain", b"not found\n")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # scrapes every few seconds would drown the log


def serve(
    liveness: Liveness, host: str, port: int, *, fixed: bool = True, span: int = 1
) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; returns the server (its port is ``server_port``).

    A fixed port must be free (else one line naming the setting); the default port moves on to
    the next free one of ``span``, so several workers run on one host with the defaults (each
    logs the port it took). Each candidate is bound for real, never probed first: two workers
    starting together cannot both pick the same port.
    """
    handler = type("Handler", (_Handler,), {"liveness": liveness})
    candidates = [port] if fixed or port == 0 else range(port, min(port + span, 65536))
    server = None
    for candidate in candidates:
        try:
            server = ThreadingHTTPServer((host, candidate), handler)
            break
        except OSError:
            continue
    if server is None and fixed:
        raise ImproperlyConfigured(
            f"WORKER_METRICS_PORT {port} on {host} is taken (another worker on this host?): "
            "give each worker its own --metrics-port, 0 for any free port, or -1 for none"
        )
    if server is None:
        raise ImproperlyConfigured(
            f"no free port for /healthz and /metrics in {port}-{port + span - 1} on {host}: "
            "set WORKER_METRICS_PORT (0 for any free port, -1 for none)"
        )
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
