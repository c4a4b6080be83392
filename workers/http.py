"""The worker's HTTP endpoint: /healthz from the in-memory heartbeat, /metrics for Prometheus."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from workers.liveness import Liveness

logger = logging.getLogger(__name__)


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
