"""A connection of its own for one thread that runs system plans alone: the listener's woken claim.

The sync face runs on Django's connections, through Django's cursor wrapper (errors mapped,
execute wrappers, the thread check, the connection looked up per statement): on a path of one
statement after 20 ms idle, that costs about 0.2 ms of a 1.3 ms claim (bench/RESULTS.md). The
async face's pools belong to the worker's loop. This is the async face's claim connection for a
thread: one psycopg connection on the system login, its statements prepared and planned
generically for its session (``GENERIC_SESSION``, as the claim pool's), each system step run as
the async face runs it (its preamble and statement in one round trip), outside Django's
wrappers as every statement of the async face is. Opened on first use (or ``open``), again
after it broke; ``close`` ends it.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connections

from wqcore.async_face import GENERIC_SESSION, UTC_SESSION, connection_kwargs, preamble
from wqcore.conf import system_alias
from wqcore.plans import Plan, Rows, Step, System, drive, prepares
from wqcore.scope import bypasses_rls
from wqcore.sync_face import column_names


class OwnConnection:
    def __init__(self) -> None:
        self._cursor: psycopg.RawCursor[Any] | None = None
        # Whether the system login bypasses row-level security (else: the all-tenants setting).
        self._bypasses = False

    def run[T](self, plan: Plan[T], first: Step | None = None) -> T:
        """Drive ``plan`` here (from ``first``, when it was begun ahead: ``plans.begin``); its
        steps must be system steps."""
        return drive(plan, self.execute, first)

    def execute(self, step: Step) -> Rows:
        if not isinstance(step, System):
            raise TypeError(f"an own connection runs system steps only, not {step!r}")
        cursor = self._open()
        statement = step.statement
        bound = statement.bind_native(step.params)
        before = preamble(step, self._bypasses, plan_setting=False)
        try:
            if not before:
                cursor.execute(statement.native_sql, bound, binary=True)
            else:
                # One implicit transaction up to the pipeline's one Sync, as on the async face.
                with cursor.connection.pipeline():
                    for query, params in before:
                        cursor.connection.execute(query, params)
                    cursor.execute(statement.native_sql, bound, binary=True)
            names = column_names(cursor)
            return Rows(names, cursor.fetchall() if names else [])
        except psycopg.Error:
            if cursor.connection.broken or cursor.connection.closed:
                self.close()  # the next statement connects again
            raise

    def open(self) -> None:
        """Connect now, if not connected (ahead of the statement that needs it)."""
        self._open()

    def _open(self) -> psycopg.RawCursor[Any]:
        if self._cursor is not None and not self._cursor.connection.closed:
            return self._cursor
        alias = system_alias()
        # Read once per process: a Django session this thread opened only for it is given back
        # (the thread's statements run here, and it would sit idle as long as the thread).
        unopened = connections[alias].connection is None
        self._bypasses = bypasses_rls(alias)
        if unopened:
            connections[alias].close()
        conn: psycopg.Connection[Any] = psycopg.Connection.connect(**connection_kwargs(alias))
        try:
            if prepares():  # never through a transaction pooler: the setting would outlive us
                conn.execute(GENERIC_SESSION)
            if conn.info.parameter_status("TimeZone") != "UTC":
                conn.execute(UTC_SESSION)
        except BaseException:
            conn.close()
            raise
        self._cursor = psycopg.RawCursor(conn)
        return self._cursor

    def close(self) -> None:
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            cursor.connection.close()
