"""The reference site as a deployment runs it (issue 21): gunicorn with two processes and
``DEBUG=false`` (the image's command and ``gunicorn.conf.py``), two real workers beside it.

The admin's CSS loads (whitenoise, from what collectstatic wrote), ``/healthz`` answers, the
web's counters add up across its processes (never backwards over ten scrapes, and exactly the
requests made), each of the queue's global gauges is exported by one endpoint of the four
(the web's ``/metrics`` and ``/metrics/queue``, each worker's ``/metrics``), and the built-in
``SECRET_KEY`` is refused in one line.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import select
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.runtime.support import PYTHON, ROOT, subprocess_env
from workqueue import api
from workqueue.models import Status, WorkItem

pytestmark = pytest.mark.usefixtures("committed")

# What describes the queue, not a process: exported from exactly one place.
GLOBAL_GAUGES = (
    "workqueue_queue_oldest_age_seconds",
    "workqueue_work_failed",
    "workqueue_outbox_lag_seconds",
    "workqueue_outbox_pending",
    "workqueue_items",
    "workqueue_tenant_depth",
    "workqueue_tenant_oldest_age_seconds",
    "workqueue_workers_live",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(predicate, timeout_s: float = 120, step_s: float = 0.1) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step_s)
    raise AssertionError("timed out")


_OUT: dict[int, str] = {}


def _peek(proc: subprocess.Popen[str]) -> str:
    """What the process printed so far (read without blocking on a pipe it still holds)."""
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        _OUT[proc.pid] = _OUT.get(proc.pid, "") + chunk.decode(errors="replace")
    return _OUT.get(proc.pid, "")


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return _OUT.pop(proc.pid, "") + (out or "")


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def _families(page: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) ", page, re.M))


def _requests_total(page: str) -> float:
    return sum(
        float(m.group(1))
        for m in re.finditer(r"^workqueue_web_requests_total\{[^}]*\} (\S+)$", page, re.M)
    )


@pytest.fixture
def production_env(tmp_path: Path) -> dict[str, str]:
    env = subprocess_env(
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="queue.example.com",
        STATIC_ROOT=str(tmp_path / "static"),
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
        WEB_CONCURRENCY="2",
    )
    # gunicorn.conf.py makes the metrics folder when the server starts; collectstatic, run
    # first, already loads the apps, whose unlabelled metrics open their files at import.
    (tmp_path / "metrics").mkdir()
    # As the image: collectstatic wrote the static files before the server started.
    subprocess.run(
        [PYTHON, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    return env


def _gunicorn(env: dict[str, str], port: int) -> subprocess.Popen[str]:
    # The image's command: gunicorn reads ./gunicorn.conf.py (the processes, the metrics folder).
    return subprocess.Popen(
        [PYTHON, "-m", "gunicorn", "project.wsgi", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _runworker(env: dict[str, str]) -> subprocess.Popen[str]:
    worker_env = {k: v for k, v in env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    worker_env.update(WORKER_METRICS_HOST="127.0.0.1", WORKER_SWEEP="false")
    return subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "NOOP", "--metrics-port", "0"],
        cwd=ROOT,
        env=worker_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _metrics_port(worker: subprocess.Popen[str]) -> int:
    found: list[int] = []

    def started() -> bool:
        assert worker.poll() is None, _peek(worker)
        m = re.search(r"worker_started .*metrics_port=(\d+)", _peek(worker))
        if m:
            found.append(int(m.group(1)))
        return bool(found)

    _wait(started)
    return found[0]


def test_the_site_under_gunicorn_with_debug_off(ctx, production_env) -> None:
    port = _free_port()
    web = _gunicorn(production_env, port)
    base = f"http://127.0.0.1:{port}"
    workers: list[subprocess.Popen[str]] = []
    try:
        last: list[object] = []

        def healthy() -> bool:
            assert web.poll() is None, _peek(web)
            try:
                last[:] = _get(f"{base}/healthz")
            except OSError as exc:
                last[:] = [exc]
                return False
            return last[0] == 200

        try:
            _wait(healthy)
        except AssertionError:
            raise AssertionError(f"/healthz: {last}; the server printed {_peek(web)}") from None
        status, content_type, body = _get(f"{base}/healthz")
        assert status == 200 and content_type == "application/json"
        assert json.loads(body) == {"database": "ok", "migrations": "applied", "healthy": True}

        # The admin is styled: its page names the stylesheet and the stylesheet is served
        # (by the host the site answers to; /healthz and /metrics answer any host).
        request = urllib.request.Request(
            f"{base}/admin/login/", headers={"Host": "queue.example.com"}
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            assert r.status == 200
            assert "/static/admin/css/base.css" in r.read().decode()
        request = urllib.request.Request(
            f"{base}/static/admin/css/base.css", headers={"Host": "queue.example.com"}
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/css")
            assert "body" in r.read().decode()
        made = 2

        # Ten scrapes, a request between each: whichever process answers, the counter is the
        # sum over both, never lower than before, and exactly the requests made.
        totals = []
        for _ in range(10):
            _, _, page = _get(f"{base}/metrics")
            totals.append(_requests_total(page))
            with urllib.request.urlopen(request, timeout=60) as r:
                assert r.status == 200
            made += 1
        assert totals == sorted(totals), totals
        assert totals[-1] == made - 1, totals

        # Two workers, some work done, then each gauge found in exactly one endpoint.
        for _ in range(5):
            api.enqueue(ctx, "NOOP", {})
        workers = [_runworker(production_env) for _ in range(2)]
        ports = [_metrics_port(w) for w in workers]
        _wait(lambda: WorkItem.objects.using("admin").filter(status=Status.DONE).count() == 5)
        pages = {
            "web /metrics": _get(f"{base}/metrics")[2],
            "web /metrics/queue": _get(f"{base}/metrics/queue")[2],
            **{f"worker {p} /metrics": _get(f"http://127.0.0.1:{p}/metrics")[2] for p in ports},
        }
        for name in GLOBAL_GAUGES:
            exporters = [where for where, page in pages.items() if name in _families(page)]
            assert exporters == ["web /metrics/queue"], (name, exporters)
        # The workers' own counters are theirs alone: summed, they are the items claimed.
        claimed = sum(
            float(m.group(1))
            for where, page in pages.items()
            if where.startswith("worker")
            for m in re.finditer(
                r'^workqueue_worker_claimed_total\{kind="NOOP"\} (\S+)$', page, re.M
            )
        )
        assert claimed == 5
        # The wait histogram is the workers' (from the rows they claimed): one wait per item.
        waits = sum(
            float(m.group(1))
            for where, page in pages.items()
            for m in re.finditer(
                r'^workqueue_worker_wait_seconds_count\{kind="NOOP",lane="default"\} (\S+)$',
                page,
                re.M,
            )
        )
        assert waits == 5
        queue = pages["web /metrics/queue"]
        assert re.search(r'^workqueue_queue_oldest_age_seconds\{lane="default"\} ', queue, re.M)
        assert "records_parked" not in queue
    finally:
        outs = [_stop(w) for w in workers]
        out = _stop(web)
        # Shown with a failure: what the server and the workers said.
        print("web:", out, *("worker: " + o for o in outs), sep="\n")
    assert "Traceback" not in out, out
    assert all("Traceback" not in o for o in outs), outs


def test_the_built_in_secret_key_is_refused_in_one_line(production_env) -> None:
    env = {k: v for k, v in production_env.items() if k != "SECRET_KEY"}
    # One process: with two, gunicorn's master may itself print a traceback (HaltServer raised
    # in its SIGCHLD handler while it stops the second refusing process), which is not ours.
    web = _gunicorn({**env, "WEB_CONCURRENCY": "1"}, _free_port())
    try:
        out, _ = web.communicate(timeout=60)
    finally:
        if web.poll() is None:
            web.kill()
    assert web.returncode != 0
    refusals = [line for line in out.splitlines() if line.startswith("error: ")]
    assert refusals and all("SECRET_KEY is the built-in local key" in r for r in refusals), out
    assert "Traceback" not in out, out
    # And a management command the same way (its one line, exit status 2).
    check = subprocess.run(
        [PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert check.returncode == 2
    assert check.stderr.strip().startswith("error: SECRET_KEY is the built-in local key")
    assert len(check.stderr.strip().splitlines()) == 1


def test_check_deploy_is_clean_with_the_documented_environment() -> None:
    """deploy.env.example, its REPLACE values filled in (the database: this test's)."""
    documented = {}
    for line in (ROOT / "deploy.env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            documented[name.strip()] = value.strip()
    assert documented["DEBUG"] == "false" and documented["SECRET_KEY"].startswith("REPLACE")
    env = subprocess_env()
    for name, value in documented.items():
        if name.endswith("DATABASE_URL"):
            continue  # this test's database, not the example's host
        env[name] = secrets.token_urlsafe(50) if name == "SECRET_KEY" else value
    check = subprocess.run(
        [PYTHON, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "no issues" in check.stdout + check.stderr
    # The placeholder itself is refused like the built-in key.
    env["SECRET_KEY"] = documented["SECRET_KEY"]
    refused = subprocess.run(
        [PYTHON, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2 and refused.stderr.startswith("error: SECRET_KEY")
