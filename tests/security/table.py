"""The attack table's machinery: each row (``Attack``) is registered with ``@attack`` by the
module of its surface, and run by ``test_attacks.py`` against a fresh ``Scene``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.test import Client

from tests.runtime.support import PYTHON, ROOT, subprocess_env
from tests.security.kinds import NOTE
from tests.security.world import SECRET, World

# -- the endpoint of a real worker, started once for the rows that need it ----------------------


class Endpoint:
    """One ``runworker SEC_NOTE`` process on a free port, started on first use."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None

    def url(self, path: str) -> str:
        if self.proc is None:
            self.proc = subprocess.Popen(
                [PYTHON, "manage.py", "runworker", NOTE.name, "--metrics-port", "0"],
                cwd=ROOT,
                env=subprocess_env(
                    WORKER_HANDLER_MODULES="tests.security.kinds",
                    WORKER_METRICS_HOST="127.0.0.1",
                    WORKER_POLL_INTERVAL_MS="100",
                ),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if found := re.search(r"worker_started .* metrics_port=(\d+)", line):
                    self.port = int(found.group(1))
                    break
            else:
                raise AssertionError(f"runworker exited ({self.proc.wait()}) before it started")
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str, method: str = "GET") -> tuple[int, str]:
        request = urllib.request.Request(self.url(path), method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


@dataclass
class Scene:
    world: World
    endpoint: Endpoint


@dataclass(frozen=True)
class Attack:
    surface: str
    name: str
    run: Callable[[Scene], None]  # raises AssertionError when the attack got through
    # B's own doing before the attack (not checked as the attack's): e.g. B's work is run.
    prepare: Callable[[Scene], None] | None = None

    def __str__(self) -> str:
        return f"{self.surface}: {self.name}"


ATTACKS: list[Attack] = []


def attack(
    surface: str, name: str, prepare: Callable[[Scene], None] | None = None
) -> Callable[[Callable[[Scene], None]], Callable[[Scene], None]]:
    def add(fn: Callable[[Scene], None]) -> Callable[[Scene], None]:
        ATTACKS.append(Attack(surface, name, fn, prepare))
        return fn

    return add


# -- helpers the surfaces share -----------------------------------------------------------------


def client_of(world: World, user_id: uuid.UUID | None = None) -> Client:
    from django.contrib.auth import get_user_model

    User = get_user_model()

    client = Client()
    client.force_login(User.objects.using("admin").get(pk=user_id or world.a.user_id))
    return client


def no_tenant_data(world: World, page: str) -> None:
    for tenant in (world.a, world.b):
        for value in (tenant.org_id, tenant.user_id, tenant.held.id, tenant.parked.id, tenant.key):
            assert str(value) not in page, f"{value} is on the page"
    assert SECRET not in page
