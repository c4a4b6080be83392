"""Transactions that name the tenant row-level security lets through.

``tenant_scope(org_id)`` runs its block in a transaction on the everyday login with the tenant
setting (``app.org_id``) set for that transaction only. ``system_scope()`` opens one on the
system login, for the named tenant-less operations only: a login with BYPASSRLS, or the login
that owns the tables, which sees every tenant while its transaction says so (``app.all_tenants``,
which the owner's policy honours: tenancy/sql/tenant_policy.sql).

The two settings are spelled here and nowhere else in Python: ``SET_TENANT`` (a statement),
``SET_TENANT_EXPR`` (the same call, for a statement that names its tenant itself),
``set_local_tenant`` (the tenant named with ``SET LOCAL``) and ``SET_ALL_TENANTS``. The tenancy
app's face (``tenancy.scope``) offers the scopes to callers.

How the tenant is named is ``WORKQUEUE["TENANT_NAMING"]``: ``set_config`` (the default) sends
``SET_TENANT`` in the same round trip as the statement, or inside it; ``set_local`` sends
``SET LOCAL app.org_id = '<uuid>'`` as a statement of its own, which Citus passes on to every
worker the transaction uses (``citus.propagate_set_commands = 'local'`` on the login), where a
``set_config`` reaches the coordinator only and every shard sees no tenant.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from wqcore.conf import system_alias, tenant_alias, wq_settings

# What an execute wrapper is handed to run the statement (Django's ``execute_wrapper``): the
# SQL, its parameters, whether it is an executemany, and the wrapper's context.
type Execute = Callable[[str, Any, bool, dict[str, Any]], Any]

TENANT_SETTING = "app.org_id"
# is_local=true: the setting ends with the transaction that set it.
SET_TENANT_EXPR = f"set_config('{TENANT_SETTING}', %(org_id)s::text, true)"
SET_TENANT = f"SELECT {SET_TENANT_EXPR}"
# The owner's policy lets its login see every tenant's rows while this says 'on' (the tables'
# owner could turn row-level security off anyway; this way it needs no DDL and no grant, and an
# everyday login that is not the owner gains nothing by setting it).


def set_local_tenant(org_id: uuid.UUID | str) -> str:
    """``SET LOCAL`` naming ``org_id`` (or no tenant, given ''): a SET takes no parameter, so
    the value is in the text, a UUID parsed and written back (nothing else can be quoted in)."""
    value = str(uuid.UUID(str(org_id))) if org_id != "" else ""
    return f"SET LOCAL {TENANT_SETTING} = '{value}'"


def naming_locally() -> bool:
    """Whether tenants are named with ``SET LOCAL`` (``WORKQUEUE["TENANT_NAMING"]``)."""
    return bool(wq_settings.TENANT_NAMING == "set_local")


def tenant_naming(org_id: uuid.UUID | str) -> tuple[str, dict[str, str] | None]:
    """The statement, and its parameters, that names ``org_id`` for the transaction, as
    ``WORKQUEUE["TENANT_NAMING"]`` says (in ``set_local`` mode: to be sent on its own)."""
    if naming_locally():
        return set_local_tenant(org_id), None
    return SET_TENANT, {"org_id": str(org_id)}


ALL_TENANTS_SETTING = "app.all_tenants"
SET_ALL_TENANTS = f"SELECT set_config('{ALL_TENANTS_SETTING}', %(on)s::text, true)"

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
    Anywhere else the setting would outlive the statement: wrap it in ``tenant_scope``. With
    tenants named by ``SET LOCAL`` only the scope will do: a statement's own ``set_config``
    never reaches Citus's workers.
    """
    if current_tenant(connection) == str(org_id):
        return True
    if naming_locally():
        return False
    return connection.get_autocommit() and not connection.in_atomic_block


@contextmanager
def tenant_scope(org_id: uuid.UUID | str, using: str | None = None) -> Iterator[str]:
    """Run the block in a transaction scoped to ``org_id``; yields the alias to query.

    The tenant never outlives the block, under any transaction mode: when the block's
    transaction goes on after it (a nested scope, an enclosing ``atomic()``, or autocommit turned
    off by the caller), the setting found on entry is put back on exit; a block that raises rolls
    its savepoint (and the setting with it) back. ``using``: the everyday login's alias unless
    another is named.
    """
    using = using or tenant_alias()
    connection = connections[using]
    outer = current_tenant(connection)
    # The transaction outlives this block: a nested scope, an enclosing atomic(), or autocommit
    # turned off by the caller. Every tenant setting goes through here, so ``outer`` is what the
    # connection's transaction names now.
    lasting = connection.in_atomic_block or not connection.get_autocommit()
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute(*tenant_naming(org_id))
        setattr(connection, _SCOPED, str(org_id))
        try:
            yield using
            if lasting and not connection.needs_rollback:
                with connection.cursor() as cursor:
                    cursor.execute(*tenant_naming(outer or ""))
        finally:
            setattr(connection, _SCOPED, outer)


@contextmanager
def deferred_tenant_scope(org_id: uuid.UUID | str, using: str | None = None) -> Iterator[str]:
    """``tenant_scope`` whose transaction and tenant setting start with the block's first
    statement, not on entry: a block that queries nothing costs no round trip (a task that
    only calls an HTTP API), one that queries pays what ``tenant_scope`` pays.

    The setting is sent just before the first statement that goes through Django's cursors on
    the connection (an execute wrapper), which is also what opens any savepoint, so it is named
    at the transaction's top level and no rolled-back savepoint takes it away. A statement sent
    around Django's cursors (the raw psycopg connection) meets no tenant: it sees no rows.
    Inside an open transaction this is ``tenant_scope`` (the setting must be named now).
    """
    using = using or tenant_alias()
    connection = connections[using]
    if connection.in_atomic_block or not connection.get_autocommit():
        with tenant_scope(org_id, using=using) as alias:
            yield alias
        return
    outer = current_tenant(connection)
    named = False
    naming = tenant_naming(org_id)

    def name_first(
        execute: Execute, sql: str, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        nonlocal named
        if not named:
            named = True
            # The raw connection: a Django cursor would come back through this wrapper.
            connection.connection.execute(*naming)
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
    """A transaction on the system login, seeing every tenant; yields the alias to query.

    On a login without BYPASSRLS (one login that owns the tables) the all-tenants setting is
    named for the block and taken back after it, as ``tenant_scope`` puts the tenant back: the
    system alias may be the everyday one, and its transaction may go on after the block."""
    alias = system_alias()
    connection = connections[alias]
    with transaction.atomic(using=alias):
        if bypasses_rls(alias) or getattr(connection, _ALL, False):
            yield alias  # nothing to name, or an outer system scope named it
            return
        with connection.cursor() as cursor:
            cursor.execute(SET_ALL_TENANTS, {"on": "on"})
        setattr(connection, _ALL, True)
        try:
            yield alias
            if not connection.needs_rollback:
                with connection.cursor() as cursor:
                    cursor.execute(SET_ALL_TENANTS, {"on": ""})
        finally:
            setattr(connection, _ALL, False)


# Whether a system scope open on the connection named the all-tenants setting.
_ALL = "_workqueue_all_tenants"
_BYPASS: dict[tuple[str, str], bool] = {}


def bypasses_rls(alias: str) -> bool:
    """Whether the login of ``alias`` bypasses row-level security (BYPASSRLS or a superuser),
    read once per process and login. Otherwise its tenant-less operations name the all-tenants
    setting, which the owner's policy honours (``SET_ALL_TENANTS``)."""
    connection = connections[alias]
    key = (alias, str(connection.settings_dict.get("USER")))
    found = _BYPASS.get(key)
    if found is None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT rolbypassrls OR rolsuper FROM pg_roles WHERE rolname = current_user"
            )
            found = _BYPASS[key] = bool(cursor.fetchone()[0])
    return found
