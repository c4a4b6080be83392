"""Transactions that name the tenant row-level security lets through.

``tenant_scope(org_id)`` opens a transaction on the everyday login with ``app.org_id`` set for
that transaction only (``set_config(..., true)``). ``system_scope()`` opens one on the system
login, which bypasses row-level security; only the named tenant-less operations use it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction

SYSTEM_ALIAS = "system"

_SET_TENANT = "SELECT current_setting('app.org_id', true), set_config('app.org_id', %s, true)"


@contextmanager
def tenant_scope(org_id: uuid.UUID | str, using: str = "default") -> Iterator[str]:
    """Run the block in a transaction scoped to ``org_id``; yields the alias to query.

    Nested inside another scope, it restores the outer tenant on exit: a savepoint keeps a
    ``set_config`` after RELEASE, so without the restore the inner tenant would leak outward.
    """
    connection = connections[using]
    nested = connection.in_atomic_block
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute(_SET_TENANT, [str(org_id)])
            previous = cursor.fetchone()[0] or ""
        yield using
        if nested:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('app.org_id', %s, true)", [previous])


@contextmanager
def system_scope() -> Iterator[str]:
    """A transaction on the system login (BYPASSRLS); yields the alias to query."""
    with transaction.atomic(using=SYSTEM_ALIAS):
        yield SYSTEM_ALIAS
