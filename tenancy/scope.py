"""Transactions that name the tenant row-level security lets through.

``tenant_scope(org_id)`` runs its block in a transaction on the everyday login with the tenant
setting (``app.org_id``) set for that transaction only. ``system_scope()`` opens one on the
system login, which bypasses row-level security; only the named tenant-less operations use it.

The tenant setting is spelled here and nowhere else in Python: ``SET_TENANT`` (a statement) and
``SET_TENANT_EXPR`` (the same call, for a statement that names its tenant itself).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

SYSTEM_ALIAS = "system"
TENANT_SETTING = "app.org_id"
# is_local=true: the setting ends with the transaction that set it.
SET_TENANT_EXPR = f"set_config('{TENANT_SETTING}', %(org_id)s::text, true)"
SET_TENANT = f"SELECT {SET_TENANT_EXPR}"

# The tenant each connection's open scope names, kept on the connection wrapper: a statement
# that names its tenant itself may run bare only where it cannot change what is set.
_SCOPED = "_workqueue_tenant"


def current_tenant(connection: BaseDatabaseWrapper) -> str | None:
    """The tenant the innermost open ``tenant_scope`` on ``connection`` names, or None."""
    return getattr(connection, _SCOPED, None)


def may_name_tenant_itself(connection: BaseDatabaseWrapper, org_id: uuid.UUID | str) -> bool:
    """Whether a statement that sets ``org_id`` for its own transaction can run bare here.

    True in autocommit outside any transaction (the statement is its own transaction, so the
    setting ends with it) and inside a scope of the same tenant (it sets what is already set).
    Anywhere else the setting would outlive the statement: wrap it in ``tenant_scope``.
    """
    if current_tenant(connection) == str(org_id):
        return True
    return connection.get_autocommit() and not connection.in_atomic_block


@contextmanager
def tenant_scope(org_id: uuid.UUID | str, using: str = "default") -> Iterator[str]:
    """Run the block in a transaction scoped to ``org_id``; yields the alias to query.

    The tenant never outlives the block, under any transaction mode: when the block's
    transaction goes on after it (a nested scope, an enclosing ``atomic()``, or autocommit turned
    off by the caller), the setting found on entry is put back on exit; a block that raises rolls
    its savepoint (and the setting with it) back.
    """
    connection = connections[using]
    outer = current_tenant(connection)
    # The transaction outlives this block: a nested scope, an enclosing atomic(), or autocommit
    # turned off by the caller. Every tenant setting goes through here, so ``outer`` is what the
    # connection's transaction names now.
    lasting = connection.in_atomic_block or not connection.get_autocommit()
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute(SET_TENANT, {"org_id": str(org_id)})
        setattr(connection, _SCOPED, str(org_id))
        try:
            yield using
            if lasting and not connection.needs_rollback:
                with connection.cursor() as cursor:
                    cursor.execute(SET_TENANT, {"org_id": outer or ""})
        finally:
            setattr(connection, _SCOPED, outer)


@contextmanager
def deferred_tenant_scope(org_id: uuid.UUID | str, using: str = "default") -> Iterator[str]:
    """``tenant_scope`` whose transaction and tenant setting start with the block's first
    statement, not on entry: a block that queries nothing costs no round trip (a task that
    only calls an HTTP API), one that queries pays what ``tenant_scope`` pays.

    The setting is sent just before the first statement that goes through Django's cursors on
    the connection (an execute wrapper), which is also what opens any savepoint, so it is named
    at the transaction's top level and no rolled-back savepoint takes it away. A statement sent
    around Django's cursors (the raw psycopg connection) meets no tenant: it sees no rows.
    Inside an open transaction this is ``tenant_scope`` (the setting must be named now).
    """
    connection = connections[using]
    if connection.in_atomic_block or not connection.get_autocommit():
        with tenant_scope(org_id, using=using) as alias:
            yield alias
        return
    outer = current_tenant(connection)
    named = False

    def name_first(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        nonlocal named
        if not named:
            named = True
            # The raw connection: a Django cursor would come back through this wrapper.
            connection.connection.execute(SET_TENANT, {"org_id": str(org_id)})
        return execute(sql, params, many, context)

    # atomic() on a connection in autocommit sends nothing until the first statement, and its
    # commit sends nothing when no statement ran (psycopg skips COMMIT outside a transaction).
    with transaction.atomic(using=using), connection.execute_wrapper(name_first):
        setattr(connection, _SCOPED, str(org_id))
        try:
            yield using
        finally:
            setattr(connection, _SCOPED, outer)


@contextmanager
def system_scope() -> Iterator[str]:
    """A transaction on the system login (BYPASSRLS); yields the alias to query."""
    with transaction.atomic(using=SYSTEM_ALIAS):
        yield SYSTEM_ALIAS
