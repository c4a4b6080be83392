"""The chaos handlers' tables, made by the test as the owner and dropped after it.

Test-only, so no product migration carries them; each gets what a product tenant table gets:
row-level security with the tenancy app's policy (``tenancy/sql/tenant_policy.sql``) and the
narrowest grants the everyday login needs (the handlers run as it, under their item's tenant).
"""

from __future__ import annotations

from django.db import connections

from tenancy.rls import SQL_DIR as TENANCY_SQL

TABLES = ("chaos_effect", "chaos_run")

_CREATE = """
CREATE TABLE chaos_effect (
    item_id uuid PRIMARY KEY,
    org_id uuid NOT NULL,
    version integer NOT NULL,
    applied_attempt integer,
    applied_token uuid
);
CREATE TABLE chaos_run (
    id uuid PRIMARY KEY,
    org_id uuid NOT NULL,
    item_id uuid NOT NULL,
    attempt integer NOT NULL,
    claim_token uuid,
    pid integer NOT NULL,
    outcome text NOT NULL,
    at timestamptz NOT NULL
);
CREATE INDEX chaos_run_item ON chaos_run (item_id);
GRANT SELECT, INSERT ON chaos_effect, chaos_run TO {app};
GRANT UPDATE (version, applied_attempt, applied_token) ON chaos_effect TO {app};
"""


def create() -> None:
    admin = connections["admin"]
    app = admin.ops.quote_name(connections["default"].settings_dict["USER"])
    policy = (TENANCY_SQL / "tenant_policy.sql").read_text()
    drop()
    with admin.cursor() as cursor:
        cursor.execute(_CREATE.format(app=app))
        for table in TABLES:
            cursor.execute(policy.format(table=table, column="org_id"))


def drop() -> None:
    with connections["admin"].cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS " + ", ".join(TABLES))
