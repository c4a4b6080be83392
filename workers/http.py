"""The worker's HTTP endpoint: /healthz from the in-memory heartbeat, /metrics for Prometheus."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.core.exceptions import ImproperlyConfigured
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from workers.liveness import Liveness

logger = logging.getLogger(__name__)


def bind(host: str, port: int, *, fixed: bool, span: int) -> tuple[str, int]:
    """The address to serve on. A fixed port must be free (else one line naming the setting);
    the default port moves on to the next free one of ``span``, so several workers run on one
    host with the defaults (each logs the port it took)."""
    candidates = [port] if fixed or port == 0 else range(port, min(port + span, 65536))
    for candidate in candidates:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, candidate))
            except OSError:
                continue
        return host, candidate
    if fixed:
        raise ImproperlyConfigured(
            f"WORKER_METRICS_PORT {port} on {host} is taken (another worker on this host?): "
            "give each worker its own --metrics-port, 0 for any free port, or -1 for none"
        )
    raise ImproperlyConfigured(
        f"no free port for /healthz and /metrics in {port}-{port + span - 1} on {host}: "
        "set WORKER_METRICS_PORT (0 for any free port, -1 for none)"
    )


def serve(liveness: Liveness, host: str, port: int) -> ThreadingHTTPServer:
    """Start serving in a daemon thread; returns the server (its port is ``server_port``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
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

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
