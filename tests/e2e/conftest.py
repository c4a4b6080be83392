"""The browser tests' servers: a real ``runserver`` and a real ``runworker`` on the test
database, and a relay of the outbox."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator

import pytest

from outbox.relay import relay_pending
from tenancy.contexts import AppType, new_request_context
from tests.e2e.support import free_port, start_worker, stop, wait_for
from tests.runtime.support import PYTHON, ROOT, subprocess_env


@pytest.fixture
def servers() -> Iterator[str]:
    """A real web server and a real worker (NOOP, NOTIFY_SHIPMENT) on the test database, and
    a relay of the outbox (what the sweep does in a deployment); yields the web's base URL."""
    port = free_port()
    env = subprocess_env(DEBUG="true", WORKER_HEARTBEAT_INTERVAL_S="0.5")
    web = subprocess.Popen(
        [PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    worker = start_worker("NOOP,NOTIFY_SHIPMENT")
    halt = threading.Event()

    def relay() -> None:
        from django.db import connections

        rctx = new_request_context(AppType.WORKER)
        try:
            while not halt.wait(0.2):
                relay_pending(rctx)
        finally:
            connections.close_all()

    relayer = threading.Thread(target=relay, daemon=True)
    relayer.start()
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/admin/login/", web)
        yield base
    finally:
        halt.set()
        relayer.join(10)
        stop(worker)
        stop(web)
