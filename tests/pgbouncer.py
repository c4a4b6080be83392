"""A PgBouncer from Debian's package in front of a PostgreSQL server, for tests and benchmarks.

``pool_mode = transaction`` and PgBouncer's defaults otherwise (no ``ignore_startup_parameters``:
a startup option is refused, as a site's PgBouncer refuses it), on a free port of 127.0.0.1,
every database name passed through to the same name on the server. A small server pool per
login, so consecutive transactions of one client land on different server connections. Started
as a child process and stopped by its own pid.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Debian installs it outside a normal user's PATH.
PGBOUNCER = shutil.which("pgbouncer") or next(
    (p for p in ("/usr/sbin/pgbouncer",) if os.access(p, os.X_OK)), None
)
# bin/test installs it where it may, and says so in one line where it may not.
NOT_INSTALLED = "pgbouncer is not installed: apt-get install pgbouncer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _run_as(host: str) -> str | None:
    """The user PgBouncer runs as: itself when not root (PgBouncer refuses root); as root, the
    owner of the server's socket directory (which may admit no one else), or nobody over TCP."""
    if os.geteuid() != 0:
        return None
    if host.startswith("/"):
        return pwd.getpwuid(os.stat(host).st_uid).pw_name
    return "nobody"


@dataclass
class PgBouncer:
    host: str
    port: int
    process: subprocess.Popen[bytes]
    folder: Path

    def url(self, user: str, dbname: str, password: str | None = None) -> str:
        secret = f":{password}" if password else ""
        return f"postgres://{user}{secret}@{self.host}:{self.port}/{dbname}"

    def log(self) -> str:
        """What it wrote: its output, then its log file."""
        paths = (self.folder / "output.txt", self.folder / "pgbouncer.log")
        return "".join(p.read_text(errors="replace") for p in paths if p.exists())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def start(
    server_host: str,
    server_port: int | str | None,
    logins: dict[str, str | None],
    *,
    pool_size: int = 2,
    max_client_conn: int = 300,
) -> PgBouncer:
    """Start PgBouncer in front of the server at ``server_host`` (a host, or a unix socket
    directory) and ``server_port``; ``logins`` are the users it admits (and the passwords it
    logs in to the server with, if the server asks for one). Returns once it accepts
    connections. Its configuration and log live in a folder of its own under the temporary
    directory (which the user it runs as can reach), removed by ``stop``."""
    if PGBOUNCER is None:
        raise RuntimeError(NOT_INSTALLED)
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    port = _free_port()
    host = server_host or "/var/run/postgresql"
    (folder / "users.txt").write_text(
        "".join(f"{_quote(user)} {_quote(password or '')}\n" for user, password in logins.items())
    )
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={host} port={server_port or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {pool_size}\n"
        f"max_client_conn = {max_client_conn}\n"
        "auth_type = trust\n"
        f"auth_file = {folder / 'users.txt'}\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
    )
    user = _run_as(host)
    if user is not None:
        uid = pwd.getpwnam(user).pw_uid
        for path in (folder, *folder.iterdir()):
            os.chown(path, uid, -1)
    command = [PGBOUNCER, *(["-u", user] if user else []), str(folder / "pgbouncer.ini")]
    with (folder / "output.txt").open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    bouncer = PgBouncer("127.0.0.1", port, process, folder)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited ({process.returncode}):\n{bouncer.log()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return bouncer
        except OSError:
            time.sleep(0.05)
    bouncer.stop()
    raise RuntimeError(f"pgbouncer did not listen on {port}:\n{bouncer.log()}")
