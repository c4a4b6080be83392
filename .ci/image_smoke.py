"""The image as a deployment runs it: built (bin/image), then started against throwaway
databases on the PostgreSQL at 127.0.0.1:5432 (trust auth, the ``postgres`` superuser) with
the host's network.

The release under test, on a new database: create_logins, migrate, the web healthy (its
HEALTHCHECK), a worker healthy (its own), an item enqueued through the HTTP API and done by the
worker's container, SIGTERM to that container draining (each item done or handed back, none
lost), every process of both as the image's non-root user, and no secret in the image (its
history, its environment, its files, with a filled-in deploy.env in the build's folder).

Then a rolling upgrade with containers: the previous release (the commit before the newest
migration) migrates a second database and serves, its worker drains what a producer enqueues
through the API, and meanwhile this release migrates, starts its worker and its web; the old
worker is stopped by SIGTERM and the old web after it. Nothing may be lost, and no container
may log a permission error or a traceback.

Prints the build time, the image size, the time to the first healthy answer and where it
goes, and each check as it passes. Exits 1 on the first failure, naming it. Removes its
containers, databases and logins whatever happens; keeps the images (the next run reuses
them: the previous release's is built once per release).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMAGE = ROOT / "bin" / "image"
PG_HOST, PG_PORT = "127.0.0.1", 5432
# What no container of a healthy deployment logs.
BAD_LINES = re.compile(r"permission denied|Traceback|complete_failed|ImproperlyConfigured", re.I)
# The image's non-root user (Dockerfile: USER 10001).
APP_UID = 10001


class SmokeFailure(Exception):
    pass


def check(ok: object, what: str) -> None:
    if not ok:
        raise SmokeFailure(what)


def say(line: str) -> None:
    print(line, flush=True)


def passed(line: str) -> None:
    say(f"  ok   {line}")


def wait_for(
    predicate: Callable[[], bool], what: str, timeout_s: float, step_s: float = 0.2
) -> float:
    """Seconds until ``predicate`` held; a failure naming ``what`` after ``timeout_s``."""
    started = time.monotonic()
    while True:
        if predicate():
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise SmokeFailure(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(step_s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def engine() -> str:
    """The engine bin/image builds with: Docker where an engine answers, else podman."""
    chosen = os.environ.get("IMAGE_ENGINE", "")
    if chosen:
        return chosen
    try:
        subprocess.run(["docker", "info"], capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "podman"
    return "docker"


ENGINE = engine()
if ENGINE == "podman":
    os.environ.setdefault("CONTAINERS_CONF", str(ROOT / "bin" / "podman" / "containers.conf"))
    os.environ.setdefault("CONTAINERS_STORAGE_CONF", str(ROOT / "bin" / "podman" / "storage.conf"))


def _quiet(stderr: str) -> str:
    # Podman's complaint that no systemd schedules the healthchecks (they are run here).
    return "\n".join(line for line in stderr.splitlines() if "systemd connection" not in line)


def engine_run(*args: str, check_ok: bool = True, timeout_s: float = 300) -> str:
    done = subprocess.run(
        [ENGINE, *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if check_ok and done.returncode != 0:
        raise SmokeFailure(
            f"{ENGINE} {' '.join(args[:3])}... exited {done.returncode}: "
            f"{(done.stdout + _quiet(done.stderr)).strip()[-2000:]}"
        )
    return done.stdout


def psql(database: str, sql: str) -> str:
    done = subprocess.run(
        ["psql", "-h", PG_HOST, "-p", str(PG_PORT), "-U", "postgres", "-d", database, "-qAtX"],
        input=sql,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise SmokeFailure(f"psql on {database}: {done.stderr.strip()}")
    return done.stdout.strip()


def counts(database: str) -> dict[str, int]:
    rows = psql(database, "SELECT status, count(*) FROM workqueue_workitem GROUP BY 1")
    return {s: int(n) for s, n in (line.split("|") for line in rows.splitlines() if line)}


@dataclass
class Deployment:
    """One database and the settings every container of it gets (by environment file)."""

    name: str
    database: str
    app_login: str
    system_login: str
    folder: Path
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(50))
    passwords: tuple[str, str] = field(
        default_factory=lambda: (secrets.token_urlsafe(24), secrets.token_urlsafe(24))
    )
    demo_password: str = field(default_factory=lambda: secrets.token_urlsafe(16))

    def url(self, login: str, password: str = "") -> str:
        who = f"{login}:{password}" if password else login
        return f"postgres://{who}@{PG_HOST}:{PG_PORT}/{self.database}"

    @property
    def app_env(self) -> Path:
        """What the web and the workers get: no owner login."""
        path = self.folder / f"{self.name}.env"
        if not path.exists():
            app_password, system_password = self.passwords
            lines = {
                "DEBUG": "false",
                "SECRET_KEY": self.secret_key,
                "DATABASE_URL": self.url(self.app_login, app_password),
                "SYSTEM_DATABASE_URL": self.url(self.system_login, system_password),
                "ALLOWED_HOSTS": "127.0.0.1",
                # Plain HTTP on loopback: the cookies must travel over it.
                "SESSION_COOKIE_SECURE": "false",
                "CSRF_COOKIE_SECURE": "false",
                "WEB_CONCURRENCY": "2",
            }
            self._write(path, lines)
        return path

    @property
    def owner_env(self) -> Path:
        """What the one-off steps get besides: the owner login."""
        path = self.folder / f"{self.name}.owner.env"
        if not path.exists():
            lines = {
                "ADMIN_DATABASE_URL": self.url("postgres"),
                "DEMO_PASSWORD": self.demo_password,
            }
            self._write(path, lines)
        return path

    @staticmethod
    def _write(path: Path, lines: dict[str, str]) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.writelines(f"{k}={v}\n" for k, v in lines.items())

    @property
    def secrets(self) -> list[str]:
        return [self.secret_key, *self.passwords, self.demo_password]


class Containers:
    """The containers this run started, each removed at the end."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.names: list[str] = []

    def one_off(self, image: str, deployment: Deployment, *command: str) -> tuple[str, float]:
        """Run ``manage.py COMMAND`` once as the owner; its output and how long it took."""
        started = time.monotonic()
        out = engine_run(
            "run",
            "--rm",
            "--network",
            "host",
            "--env-file",
            str(deployment.app_env),
            "--env-file",
            str(deployment.owner_env),
            image,
            "python",
            "manage.py",
            *command,
        )
        return out, time.monotonic() - started

    def start(
        self, role: str, image: str, deployment: Deployment, *command: str, **env: str
    ) -> str:
        name = f"{self.prefix}-{role}"
        args = ["run", "--detach", "--name", name, "--hostname", name, "--network", "host"]
        args += ["--env-file", str(deployment.app_env)]
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        self.names.append(name)
        engine_run(*args, image, *command)
        return name

    def web(self, image: str, deployment: Deployment, role: str = "web") -> tuple[str, str]:
        port = free_port()
        name = self.start(
            role,
            image,
            deployment,
            PORT=str(port),
            # Loopback only: the host's network is shared with the machine.
            GUNICORN_CMD_ARGS=f"--bind 127.0.0.1:{port}",
            HEALTHCHECK_URL=f"http://127.0.0.1:{port}/healthz",
        )
        return name, f"http://127.0.0.1:{port}"

    def worker(self, image: str, deployment: Deployment, role: str, **env: str) -> str:
        port = free_port()
        return self.start(
            role,
            image,
            deployment,
            "python",
            "manage.py",
            "runworker",
            "NOOP",
            WORKER_METRICS_HOST="127.0.0.1",
            WORKER_METRICS_PORT=str(port),
            HEALTHCHECK_URL=f"http://127.0.0.1:{port}/healthz",
            **env,
        )

    def remove_all(self) -> None:
        for name in reversed(self.names):
            engine_run("rm", "--force", "--time", "5", name, check_ok=False, timeout_s=60)


def healthy(container: str) -> bool:
    """The container's own HEALTHCHECK, run now (podman has no systemd here to run it)."""
    if ENGINE == "podman":
        return (
            subprocess.run(
                [ENGINE, "healthcheck", "run", container], capture_output=True, check=False
            ).returncode
            == 0
        )
    status = engine_run("inspect", "--format", "{{.State.Health.Status}}", container).strip()
    return status == "healthy"


def running(container: str) -> bool:
    return engine_run("inspect", "--format", "{{.State.Running}}", container).strip() == "true"


def logs(container: str) -> str:
    done = subprocess.run(
        [ENGINE, "logs", container], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout + _quiet(done.stderr)


def wait_healthy(container: str, timeout_s: float = 120) -> float:
    def ok() -> bool:
        if not running(container):
            raise SmokeFailure(f"{container} exited: {logs(container)[-3000:]}")
        return healthy(container)

    return wait_for(ok, f"{container} healthy", timeout_s, step_s=0.3)


def stop(container: str, timeout_s: int = 60) -> tuple[float, int]:
    """SIGTERM (the image's stop signal), and the seconds until it exited, and its code."""
    started = time.monotonic()
    engine_run("stop", "--time", str(timeout_s), container, timeout_s=timeout_s + 30)
    took = time.monotonic() - started
    code = int(engine_run("inspect", "--format", "{{.State.ExitCode}}", container).strip())
    return took, code


def uids(container: str) -> set[int]:
    """The real and effective uid of every process in the container."""
    script = (
        "import glob\n"
        "for s in glob.glob('/proc/[0-9]*/status'):\n"
        "    try:\n"
        "        lines = open(s).read().splitlines()\n"
        "    except OSError:\n"
        "        continue\n"
        "    print(*[l.split()[1:3] for l in lines if l.startswith('Uid:')][0])\n"
    )
    out = engine_run("exec", container, "python", "-c", script)
    return {int(u) for line in out.splitlines() for u in line.split()}


def bad_lines(container: str) -> list[str]:
    return [line for line in logs(container).splitlines() if BAD_LINES.search(line)]


class Api:
    """A signed-in member of the demo org, through the HTTP API (session and CSRF, as a
    browser's script)."""

    def __init__(self, base: str, username: str, password: str) -> None:
        self.base = base
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        page = self._call("GET", "/login/")[1]
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        check(match, f"{base}/login/ has no CSRF token")
        assert match is not None
        form = {"username": username, "password": password, "csrfmiddlewaretoken": match[1]}
        status, _ = self._call(
            "POST",
            "/login/",
            urllib.parse.urlencode(form).encode(),
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        check(self._cookie("sessionid"), f"signing in at {base}/login/ failed ({status})")

    def _cookie(self, name: str) -> str:
        return next((c.value or "" for c in self.jar if c.name == name), "")

    def _call(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers=headers or {}
        )
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def enqueue(self, payload: dict[str, Any]) -> str:
        body = json.dumps({"kind": "NOOP", "payload": payload}).encode()
        headers = {"Content-Type": "application/json", "X-CSRFToken": self._cookie("csrftoken")}
        status, answer = self._call("POST", "/api/work/", body, headers)
        check(status in (200, 201), f"POST /api/work/ answered {status}: {answer[:300]}")
        return str(json.loads(answer)["item"]["id"])

    def item(self, item_id: str) -> dict[str, Any]:
        status, answer = self._call("GET", f"/api/work/{item_id}")
        check(status == 200, f"GET /api/work/{item_id} answered {status}: {answer[:300]}")
        item: dict[str, Any] = json.loads(answer)["item"]
        return item


def healthz(base: str) -> int:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def log_time(container: str, pattern: str) -> datetime | None:
    """When the container first logged a line matching ``pattern`` (the log's own ts=)."""
    for line in logs(container).splitlines():
        if re.search(pattern, line):
            match = re.search(r"ts=(\S+)", line)
            if match:
                return datetime.fromisoformat(match[1].replace("Z", "+00:00"))
    return None


def started_at(container: str) -> datetime:
    """When the engine started the container (podman: ``2026-01-02 03:04:05.123456789 +0000
    UTC``; Docker: RFC 3339 with nanoseconds), to the microsecond."""
    raw = engine_run("inspect", "--format", "{{.State.StartedAt}}", container).strip()
    match = re.match(
        r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(\.\d{1,6})?\d*\s*(Z|[+-]\d\d:?\d\d)?", raw
    )
    check(match, f"the container's start time {raw!r}")
    assert match is not None
    zone = (match[4] or "+00:00").replace("Z", "+00:00")
    return datetime.fromisoformat(f"{match[1]}T{match[2]}{match[3] or ''}{zone}")


@contextmanager
def databases(names: list[str], logins: list[str]) -> Iterator[None]:
    """The throwaway databases (create_logins makes them) and logins, dropped at the end."""
    try:
        yield
    finally:
        for name in names:
            psql("postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for login in logins:
            psql("postgres", f'DROP ROLE IF EXISTS "{login}"')


@contextmanager
def operators_env_files() -> Iterator[str]:
    """Filled-in environment files where an operator keeps them, beside the Dockerfile, while
    the image builds (the ones already there are left as they are): none may reach the image."""
    marker = "smoke-" + secrets.token_urlsafe(32)
    made = []
    for name in ("deploy.env", "compose.env", "compose.owner.env"):
        path = ROOT / name
        if not path.exists():
            path.write_text(f"SECRET_KEY={marker}\nPOSTGRES_PASSWORD={marker}\n")
            made.append(path)
    try:
        yield marker
    finally:
        for path in made:
            path.unlink(missing_ok=True)


def image_step(*args: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    """``bin/image ARGS``: the last line it printed (a name), and how long it took."""
    started = time.monotonic()
    done = subprocess.run(
        [str(IMAGE), *args], capture_output=True, text=True, timeout=1800, check=False, env=env
    )
    if done.returncode != 0:
        raise SmokeFailure(f"bin/image {' '.join(args)}: {done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1], time.monotonic() - started


def build(*args: str) -> tuple[str, float]:
    return image_step("build", *args)


def image_size_mb(image: str) -> int:
    return int(engine_run("image", "inspect", "--format", "{{.Size}}", image).strip()) // 1_000_000


def previous_release() -> tuple[str, str]:
    """The commit before the newest migration (the release this one upgrades), and the
    migration files that came after it."""
    git = ["git", "-C", str(ROOT)]
    # The product's migrations (the image's), not the test sites'.
    migrations = [":(glob)**/migrations/0*.py", ":(exclude)tests/**", ":(exclude)bench/**"]
    newest = subprocess.run(
        [*git, "log", "-1", "--format=%H", "HEAD", "--", *migrations],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    check(newest, "no commit touched a migration: nothing to upgrade from")
    found = subprocess.run(
        [*git, "rev-parse", "--verify", "--quiet", f"{newest}^"],
        capture_output=True,
        text=True,
        check=False,
    )
    check(
        found.returncode == 0,
        f"the parent of {newest[:12]} is not in this clone (a shallow clone?): the rolling "
        "upgrade builds it; fetch the history (git fetch --unshallow)",
    )
    return found.stdout.strip(), newest


def release_image(commit: str) -> tuple[str, float]:
    """The image of ``commit`` (its files, this Dockerfile), kept by both: built once."""
    recipe = hashlib.sha256((ROOT / "Dockerfile").read_bytes()).hexdigest()[:8]
    tag = f"localhost/workqueue:{commit[:12]}-dockerfile-{recipe}"
    if ENGINE == "podman":
        present = subprocess.run([ENGINE, "image", "exists", tag], check=False).returncode == 0
    else:
        present = (
            subprocess.run(
                [ENGINE, "image", "inspect", tag], capture_output=True, check=False
            ).returncode
            == 0
        )
    if present:
        return tag, 0.0
    with tempfile.TemporaryDirectory(prefix="workqueue-release-") as folder:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        return build("--tag", tag, "--context", folder, "--revision", commit[:12])


def prune_images(keep: set[str]) -> None:
    """Remove the images bin/image made that this run does not keep (the older releases' and
    commits'), and the layers no image uses any more; an image a container uses stays."""
    out = engine_run(
        "images",
        "--filter",
        "label=org.opencontainers.image.revision",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        check_ok=False,
    )
    kept = keep | {"localhost/workqueue:latest"}
    for tag in sorted(set(out.split()) - kept):
        if tag.startswith("localhost/workqueue:"):
            engine_run("rmi", tag, check_ok=False)
    engine_run("image", "prune", "--force", check_ok=False)


def layer_sizes(image: str) -> str:
    """What the image's size is made of: its layers that hold anything, largest first."""
    out = engine_run("history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", image)
    units = {"B": 1e-6, "kB": 1e-3, "KB": 1e-3, "MB": 1.0, "GB": 1e3}
    names = {
        "pip install": "the dependencies",
        "collectstatic": "the static files",
        "COPY dir:": "the site",
        "ADD file:": "the base",
    }
    layers = []
    for line in out.splitlines():
        size, _, created_by = line.partition("\t")
        match = re.match(r"([\d.]+)\s*([kKMG]?B)", size)
        mb = float(match[1]) * units[match[2]] if match else 0.0
        if mb >= 0.5:
            name = next((n for key, n in names.items() if key in created_by), created_by[:40])
            layers.append((mb, name))
    layers.sort(reverse=True)
    return ", ".join(f"{name} {mb:.0f} MB" for mb, name in layers)


def no_secret_in(image: str, found_in: list[str], marker: str) -> None:
    history = engine_run("history", "--no-trunc", "--format", "{{.CreatedBy}}", image)
    environment = json.loads(
        engine_run("image", "inspect", "--format", "{{json .Config.Env}}", image)
    )
    names = {entry.split("=", 1)[0] for entry in environment}
    leaked = names & {"SECRET_KEY", "DATABASE_URL", "SYSTEM_DATABASE_URL", "ADMIN_DATABASE_URL"}
    check(not leaked, f"the image's environment sets {sorted(leaked)}")
    check(not any("PASSWORD" in name for name in names), f"the image's environment: {names}")
    for secret in [marker, *found_in]:
        check(secret not in history, "a secret is in the image's history")
        check(secret not in json.dumps(environment), "a secret is in the image's environment")
    # The files: no environment file, and the marker nowhere under /app.
    out = engine_run(
        "run",
        "--rm",
        "--network",
        "none",
        image,
        "sh",
        "-c",
        f"find /app -name '*.env' -o -name .env; grep -rlF '{marker}' /app /etc || true",
    )
    check(not out.strip(), f"an environment file or its secret is in the image: {out.strip()}")


def release_under_test(
    image: str, run: Containers, deployment: Deployment, timings: dict[str, float]
) -> None:
    say(f"== the release under test on a new database ({deployment.database})")
    out, took = run.one_off(image, deployment, "create_logins")
    check("logins ready" in out, f"create_logins: {out}")
    passed(f"create_logins in {took:.1f} s")
    out, took = run.one_off(image, deployment, "migrate", "--database", "admin", "--no-input")
    applied = out.count("... OK")
    check(applied > 0, f"migrate applied nothing: {out}")
    passed(f"migrate: {applied} migrations in {took:.1f} s")
    out, _ = run.one_off(image, deployment, "create_demo_tenant")

    clicked = time.monotonic()
    web, base = run.web(image, deployment)
    returned = time.monotonic() - clicked
    first = wait_for(lambda: healthz(base) == 200, f"{base}/healthz 200", 120, step_s=0.05)
    timings["first_healthy_s"] = first
    start = started_at(web)
    listening = log_time(web, r"Listening at")
    booted = log_time(web, r"Booting worker")
    where = [f"podman run returned {returned:.2f} s"] if ENGINE == "podman" else []
    if listening and booted:
        where.append(f"gunicorn listening +{(listening - start).total_seconds():.2f} s")
        where.append(f"its processes forked +{(booted - start).total_seconds():.2f} s")
    load = engine_run(
        "exec",
        web,
        "python",
        "-c",
        "import time; t = time.perf_counter(); import project.wsgi; "
        "print(f'{time.perf_counter() - t:.2f}')",
    ).strip()
    where.append(f"loading the site in a process (Django, the apps, the start-up check) {load} s")
    say(f"  time to the first healthy answer: {first:.2f} s from podman run ({'; '.join(where)})")
    took = wait_healthy(web)
    passed(f"the web is healthy by its HEALTHCHECK ({web})")

    worker = run.worker(image, deployment, "worker", WORKER_SHUTDOWN_GRACE_S="5")
    took = wait_healthy(worker)
    timings["worker_healthy_s"] = took
    passed(f"a worker is healthy by its HEALTHCHECK in {took:.1f} s ({worker})")

    api = Api(base, "admin", deployment.demo_password)
    item_id = api.enqueue({})
    wait_for(lambda: api.item(item_id)["status"] == "done", "the item done", 60)
    hosts = psql(
        deployment.database,
        f"SELECT DISTINCT host FROM workqueue_attempt WHERE item_id = '{item_id}'",
    )
    check(hosts == worker, f"the item was run by {hosts!r}, not by {worker}")
    passed(f"an item enqueued by POST /api/work/ was done by the worker's container ({item_id})")

    for container in (web, worker):
        found = uids(container)
        check(found == {APP_UID}, f"{container} runs processes as uids {sorted(found)}")
    passed(f"every process of the web and the worker runs as uid {APP_UID}, not root")

    # A drain: short items finish within the grace, long ones are handed back.
    short = [api.enqueue({"sleep_s": 1}) for _ in range(20)]
    long = [api.enqueue({"sleep_s": 30}) for _ in range(4)]
    wait_for(
        lambda: counts(deployment.database).get("claimed", 0) >= len(long),
        "the worker claiming the long items",
        60,
    )
    running_then = counts(deployment.database).get("claimed", 0)
    took, code = stop(worker)
    now = counts(deployment.database)
    handed_back = int(
        psql(
            deployment.database,
            "SELECT count(*) FROM workqueue_workitem WHERE status = 'pending' AND attempts = 0 "
            "AND claimed_by IS NULL AND id IN (" + ",".join(f"'{i}'" for i in long + short) + ")",
        )
    )
    done = now.get("done", 0) - 1  # the first item's
    lost = len(short) + len(long) - done - handed_back
    say(
        f"  drain on SIGTERM: {len(short) + len(long)} items, {running_then} running at the "
        f"signal: {done} done, {handed_back} handed back, lost {lost} (the container stopped "
        f"in {took:.1f} s, exit {code})"
    )
    check(code == 0, f"the worker exited {code} on SIGTERM: {logs(worker)[-2000:]}")
    check(now.get("claimed", 0) == 0, f"items still claimed after the drain: {now}")
    check(lost == 0, f"lost {lost} items in the drain: {now}")
    check(handed_back >= len(long), f"the long items were not handed back: {now}")
    passed("SIGTERM to the worker's container drained it: lost 0")

    for container in (web, worker):
        lines = bad_lines(container)
        check(not lines, f"{container} logged: {lines[:5]}")
    stop(web)


def rolling_upgrade(
    image: str, run: Containers, deployment: Deployment, timings: dict[str, float]
) -> str:
    """The upgrade from the previous release; returns that release's image."""
    previous, newest = previous_release()
    old, took = release_image(previous)
    timings["previous_build_s"] = took
    built = f"built in {took:.0f} s" if took else "kept from an earlier run"
    say(f"== a rolling upgrade from {previous[:12]} (the release before {newest[:12]}; {built})")
    run.one_off(old, deployment, "create_logins")
    run.one_off(old, deployment, "migrate", "--database", "admin", "--no-input")
    run.one_off(old, deployment, "create_demo_tenant")
    old_web, old_base = run.web(old, deployment, "old-web")
    old_worker = run.worker(old, deployment, "old-worker")
    wait_healthy(old_web)
    wait_healthy(old_worker)
    passed("the previous release serves and works")

    # A producer through the API, on the old web and then the new one, until told to stop.
    made: list[str] = []
    errors: list[str] = []
    stop_producing = threading.Event()
    target = {"base": old_base}

    def produce() -> None:
        clients: dict[str, Api] = {}
        while not stop_producing.is_set():
            base = target["base"]
            try:
                client = clients.get(base) or Api(base, "admin", deployment.demo_password)
                clients[base] = client
                made.append(client.enqueue({"sleep_s": 0.05}))
            except (SmokeFailure, OSError, ValueError, KeyError) as exc:
                errors.append(f"{base}: {exc}")
            time.sleep(0.05)

    producer = threading.Thread(target=produce, name="producer")
    producer.start()
    try:
        wait_for(lambda: len(made) >= 20, "the producer enqueuing", 60)
        migrate_from = psql(deployment.database, "SELECT now()")
        out, _ = run.one_off(image, deployment, "create_logins")
        out, took = run.one_off(image, deployment, "migrate", "--database", "admin", "--no-input")
        migrate_to = psql(deployment.database, "SELECT now()")
        applied = re.findall(r"Applying (\S+)\.\.\. OK", out)
        check(applied, f"the new release's migrate applied nothing: {out}")
        by_old_meanwhile = int(
            psql(
                deployment.database,
                f"SELECT count(*) FROM workqueue_attempt WHERE host = '{old_worker}' AND "
                f"outcome = 'done' AND ended_at BETWEEN '{migrate_from}' AND '{migrate_to}'",
            )
        )
        say(
            f"  the new release migrated ({', '.join(applied)}) in {took:.1f} s while the old "
            f"worker finished {by_old_meanwhile} items"
        )
        check(by_old_meanwhile > 0, "the old worker finished nothing while the migration ran")
        new_worker = run.worker(image, deployment, "new-worker")
        new_web, new_base = run.web(image, deployment, "new-web")
        wait_healthy(new_worker)
        wait_healthy(new_web)
        target["base"] = new_base
        took, code = stop(old_worker)
        check(code == 0, f"the old worker exited {code}: {logs(old_worker)[-2000:]}")
        stop(old_web)
        passed(f"the old worker drained on SIGTERM in {took:.1f} s; the new web and worker serve")
        time.sleep(2)
    finally:
        stop_producing.set()
        producer.join(timeout=60)
    check(not errors, f"the producer met errors: {errors[:5]}")
    ids = ",".join(f"'{i}'" for i in made)

    def all_done() -> bool:
        return psql(
            deployment.database,
            f"SELECT count(*) FROM workqueue_workitem WHERE status = 'done' AND id IN ({ids})",
        ) == str(len(made))

    wait_for(all_done, "every item enqueued during the upgrade done", 120)
    by_host = dict(
        line.split("|")
        for line in psql(
            deployment.database,
            f"SELECT host, count(*) FROM workqueue_attempt WHERE item_id IN ({ids}) "
            "AND outcome = 'done' GROUP BY 1",
        ).splitlines()
    )
    stop(new_worker)
    for container in (old_web, old_worker, new_web, new_worker):
        lines = bad_lines(container)
        check(not lines, f"{container} logged: {lines[:5]}")
    say(
        f"  rolling upgrade: {len(made)} items enqueued through the API, "
        f"{by_host.get(old_worker, 0)} done by the old worker, {by_host.get(new_worker, 0)} by "
        f"the new one, lost 0, no permission error"
    )
    passed("the rolling upgrade lost nothing and refused nothing")
    stop(new_web)
    return old


def compose_check(image: str, folder: Path, timings: dict[str, float]) -> None:
    """compose.yaml as an operator runs it (a copy, with its own environment files, project
    and port, so a stack of the same machine's is never touched)."""
    say(f"== compose.yaml ({'podman-compose' if ENGINE == 'podman' else 'docker compose'})")
    work = folder / "compose"
    work.mkdir()
    (work / "compose.yaml").write_text((ROOT / "compose.yaml").read_text())
    project = f"wq-smoke-{os.getpid()}"
    port = free_port()
    env = {
        **os.environ,
        "WORKQUEUE_COMPOSE_FILE": str(work / "compose.yaml"),
        "COMPOSE_PROJECT_NAME": project,
        "WEB_PORT": str(port),
        "WORKQUEUE_IMAGE": image,
    }

    def compose(*args: str) -> str:
        done = subprocess.run(
            [str(IMAGE), "compose", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise SmokeFailure(f"bin/image compose {' '.join(args)}: {done.stderr[-3000:]}")
        return done.stdout

    def containers(*, every: bool = False) -> dict[str, str]:
        """The project's containers: service -> container name."""
        out = engine_run(
            "ps",
            *(["--all"] if every else []),
            "--filter",
            f"label=com.docker.compose.project={project}",
            "--format",
            '{{.Names}} {{index .Labels "com.docker.compose.service"}}',
        )
        return {service: name for name, service in (line.split() for line in out.splitlines())}

    subprocess.run([str(IMAGE), "compose-env"], env=env, capture_output=True, check=True)
    postgres, took = image_step("postgres", env=env)
    say(f"  the database's image {postgres}: {took:.1f} s (kept after its first time)")
    owner_password = re.findall(
        r"^POSTGRES_PASSWORD=(.+)$", (work / "compose.owner.env").read_text(), re.M
    )[0]
    try:
        started = time.monotonic()
        compose("up", "-d")
        up = containers()
        services = {"db", "web", "worker-1", "worker-2", "sweep"}
        check(services <= set(up), f"compose up started {sorted(up)}, not {sorted(services)}")
        for service in ("db", "web", "worker-1", "worker-2"):
            wait_healthy(up[service])
        check(running(up["sweep"]), "the sweep is not running")
        timings["compose_up_s"] = time.monotonic() - started
        passed(
            f"compose up: db, web, worker-1, worker-2 healthy and the sweep running in "
            f"{timings['compose_up_s']:.0f} s"
        )
        password = secrets.token_urlsafe(16)
        engine_run(
            "run",
            "--rm",
            "--network",
            f"{project}_default",
            "--env-file",
            str(work / "compose.env"),
            "--env-file",
            str(work / "compose.owner.env"),
            "--env",
            f"DEMO_PASSWORD={password}",
            image,
            "python",
            "manage.py",
            "create_demo_tenant",
        )
        api = Api(f"http://127.0.0.1:{port}", "admin", password)
        item_id = api.enqueue({})
        wait_for(lambda: api.item(item_id)["status"] == "done", "the compose item done", 60)
        host = psql_in(up["db"], f"SELECT host FROM workqueue_attempt WHERE item_id = '{item_id}'")
        workers = {
            engine_run("inspect", "--format", "{{.Config.Hostname}}", up[w]).strip()
            for w in ("worker-1", "worker-2")
        }
        check(host in workers, f"the compose item was run by {host!r}, not a worker of it")
        passed(f"an item enqueued through the published port was done by a worker ({host})")
        for service in ("web", "worker-1", "worker-2", "sweep"):
            check(
                owner_password not in engine_run("exec", up[service], "env"),
                f"{service} was given the database superuser's password",
            )
        passed("the web, the workers and the sweep never see the database superuser's password")
    finally:
        started = time.monotonic()
        compose("down", "-t", "40", "-v")
        timings["compose_down_s"] = time.monotonic() - started
    left = containers(every=True)
    check(not left, f"compose down left {sorted(left.values())}")
    passed(f"compose down in {timings['compose_down_s']:.0f} s: nothing left running")


def psql_in(container: str, sql: str) -> str:
    """``sql`` as the superuser, in the database container of a compose project."""
    return engine_run(
        "exec", container, "psql", "-U", "postgres", "-d", "workqueue", "-qAtXc", sql
    ).strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-upgrade", action="store_true", help="leave out the rolling upgrade")
    parser.add_argument("--skip-compose", action="store_true", help="leave out compose.yaml")
    options = parser.parse_args()
    pid = os.getpid()
    started = time.monotonic()
    timings: dict[str, float] = {}
    keep: set[str] = set()
    run = Containers(f"wq-smoke-{pid}")
    names = [f"wq_image_smoke_{pid}", f"wq_image_upgrade_{pid}"]
    logins = [f"wq_image_{pid}_app", f"wq_image_{pid}_system"]
    with tempfile.TemporaryDirectory(prefix="workqueue-smoke-") as folder:
        fresh = Deployment("fresh", names[0], logins[0], logins[1], Path(folder))
        upgrade = Deployment("upgrade", names[1], logins[0], logins[1], Path(folder))
        upgrade.passwords = fresh.passwords  # the same logins
        try:
            try:
                psql("postgres", "SELECT 1")
            except SmokeFailure as exc:
                raise SmokeFailure(
                    f"the image smoke runs its databases on the PostgreSQL at {PG_HOST}:{PG_PORT} "
                    f"(trust auth, the postgres superuser): {exc}"
                ) from None
            with databases(names, logins):
                try:
                    say(f"== the image ({ENGINE})")
                    base, took = image_step("base")
                    timings["base_s"] = took
                    say(f"  the base {base}: {took:.1f} s (kept in the store after its first time)")
                    with operators_env_files() as marker:
                        image, took = build()
                    timings["build_s"] = took
                    say(f"  build {took:.1f} s, {image_size_mb(image)} MB: {image}")
                    say(f"  its size: {layer_sizes(image)}")
                    no_secret_in(image, fresh.secrets, marker)
                    passed(
                        "no secret in the image: its history, its environment, its files "
                        "(a filled-in deploy.env and compose.env in its folder stayed out)"
                    )
                    release_under_test(image, run, fresh, timings)
                    keep.add(image)
                    if not options.skip_upgrade:
                        keep.add(rolling_upgrade(image, run, upgrade, timings))
                    if not options.skip_compose:
                        compose_check(image, Path(folder), timings)
                finally:
                    run.remove_all()
                    if keep:
                        prune_images(keep)
        except SmokeFailure as exc:
            say(f"FAILED: {exc}")
            return 1
    total = time.monotonic() - started
    say(
        f"image smoke: every check passed in {total:.0f} s (the base {timings['base_s']:.0f} s, "
        f"the build {timings['build_s']:.0f} s, the first healthy answer "
        f"{timings['first_healthy_s']:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
