"""Each process names its PostgreSQL connections by role, so ``pg_stat_activity`` tells a worker
from the web, the sweep and the listener: ``application_name`` ``workqueue <role> <host>:<pid>``.

Through libpq's ``PGAPPNAME``, which every connection reads when it opens (Django's and the
store's pools alike), set before the first one. A site that names its connections itself (its own
``PGAPPNAME``, or ``application_name`` in a database's ``OPTIONS``) keeps its name.

Inside a worker two parts have a role of their own: the listener (``listener``: its LISTEN
session is opened with the name, ``role_name``) and the maintenance thread that runs the sweep
and the outbox relay (``sweep``: each Django connection that thread opens is renamed as it
opens, ``name_thread_connections``)."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from django.db.backends.signals import connection_created

from wqcore.conf import wq_settings

PREFIX = "workqueue "
# PostgreSQL keeps the first 63 bytes of an application_name.
LONGEST = 63

_thread = threading.local()


def _name(role: str) -> str:
    name = f"{PREFIX}{role} {socket.gethostname()}:{os.getpid()}"
    return name.encode()[:LONGEST].decode(errors="ignore")


def name_connections(role: str) -> None:
    """Name the connections this process opens from now on as ``role`` (web, worker, sweep)."""
    current = os.environ.get("PGAPPNAME")
    if current and not current.startswith(PREFIX):
        return
    os.environ["PGAPPNAME"] = _name(role)


def role_name(role: str) -> str | None:
    """The name of this process's connections of ``role``, when this process names its
    connections (``name_connections``); None when it does not, or the site names them."""
    current = os.environ.get("PGAPPNAME")
    if not current or not current.startswith(PREFIX):
        return None
    return _name(role)


def named(params: dict[str, Any], role: str) -> dict[str, Any]:
    """psycopg's ``params`` for a connection of ``role`` (``role_name``), unless they name one."""
    name = role_name(role)
    if name is not None and "application_name" not in params:
        params["application_name"] = name
    return params


def name_thread_connections(role: str) -> None:
    """Name the Django connections this thread opens from now on as ``role`` (a thread pool's
    initializer), when the process names its connections."""
    _thread.role = role


def _rename(sender: Any, connection: Any, **kwargs: Any) -> None:
    role = getattr(_thread, "role", None)
    name = role_name(role) if role is not None else None
    if name is None or connection.vendor != "postgresql":
        return
    # A session setting: behind a transaction pooler the session is lent per transaction, and
    # would carry the name to whoever holds it next.
    if wq_settings.POOLER == "transaction":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('application_name', %s, false)", [name])


connection_created.connect(_rename, dispatch_uid="wqcore.appname.rename")
