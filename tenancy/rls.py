"""Row-level security: the migration step that applies the tenant policy, and its audit.

The policy's SQL lives in ``sql/tenant_policy.sql``; migrations load it by name so every tenant
table carries the same policy, and ``tables_missing_policy`` tells which tables do not.
"""

from __future__ import annotations

from pathlib import Path

from django.apps import apps
from django.db import migrations
from django.db.backends.base.base import BaseDatabaseWrapper

from wqcore.sqlfiles import run_sql_file

SQL_DIR = Path(__file__).with_name("sql")
POLICY_NAME = "tenant_isolation"
OWNER_POLICY_NAME = "owner_all_tenants"
# What the owner's policy says, as pg_policies prints it back.
OWNER_POLICY_EXPRESSION = "(current_setting('app.all_tenants'::text, true) = 'on'::text)"


def policy_expression(column: str = "org_id") -> str:
    """What the policy's USING and WITH CHECK must say, as pg_policies prints it back."""
    return f"({column} = (NULLIF(current_setting('app.org_id'::text, true), ''::text))::uuid)"


def apply_tenant_policy(table: str, column: str = "org_id") -> migrations.RunSQL:
    """A migration operation: ENABLE + FORCE row-level security, the tenant policy on
    ``column``, and the owner's all-tenants policy."""
    return run_sql_file(SQL_DIR, "tenant_policy", table=table, column=column)


def tenant_tables() -> dict[str, str]:
    """Every model table that belongs to a tenant, with the column naming its tenant: each
    table with an ``org_id`` (a field, or an ``org`` foreign key), and the orgs table itself
    (``id``) when the tenancy app is installed."""
    tables = {}
    if apps.is_installed("tenancy"):
        tables[apps.get_model("workqueue_tenancy", "Org")._meta.db_table] = "id"
    for model in apps.get_models():
        if model._meta.proxy or not model._meta.managed:
            continue
        columns = {f.column for f in model._meta.concrete_fields}
        if "org_id" in columns:
            tables[model._meta.db_table] = "org_id"
    return dict(sorted(tables.items()))


def tables_missing_policy(
    connection: BaseDatabaseWrapper, tables: dict[str, str] | list[str]
) -> dict[str, str]:
    """Which of ``tables`` (name -> tenant column, ``org_id`` for a plain list) lack ENABLE,
    FORCE, the exact tenant policy or the owner's all-tenants policy, and what is missing."""
    if not isinstance(tables, dict):
        tables = dict.fromkeys(tables, "org_id")
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, p.qual, p.with_check,
                   o.qual
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
              LEFT JOIN pg_policies p
                ON p.schemaname = n.nspname AND p.tablename = c.relname AND p.policyname = %(name)s
              LEFT JOIN pg_policies o
                ON o.schemaname = n.nspname AND o.tablename = c.relname AND o.policyname = %(owner)s
             WHERE c.relname = ANY(%(tables)s)
            """,
            {"name": POLICY_NAME, "owner": OWNER_POLICY_NAME, "tables": list(tables)},
        )
        found = {row[0]: row[1:] for row in cursor.fetchall()}
    missing = {}
    for table, column in tables.items():
        if table not in found:
            missing[table] = "no such table"
            continue
        enabled, forced, qual, check, owner_qual = found[table]
        expected = policy_expression(column)
        policy_ok = qual == expected and check == expected
        problems = [
            what
            for what, ok in (
                ("ENABLE", enabled),
                ("FORCE", forced),
                ("policy", policy_ok),
                ("owner policy", owner_qual == OWNER_POLICY_EXPRESSION),
            )
            if not ok
        ]
        if problems:
            missing[table] = "missing " + ", ".join(problems)
    return missing
