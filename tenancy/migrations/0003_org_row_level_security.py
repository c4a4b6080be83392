"""Row-level security on orgs: a login sees the org its transaction names, and no other.

The org table names the tenants, so its policy keys on ``id`` rather than ``org_id``; the
system login (BYPASSRLS) lists every org for the operations that must (the claim's context
lookup, the sweep, sign-in). The SQL is frozen here: a change is a new migration.
"""

from django.db import migrations

FORWARD = """
ALTER TABLE tenancy_org ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenancy_org FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON tenancy_org
    USING (id = NULLIF(current_setting('app.org_id', true), '')::uuid)
    WITH CHECK (id = NULLIF(current_setting('app.org_id', true), '')::uuid);
"""

REVERSE = """
DROP POLICY IF EXISTS tenant_isolation ON tenancy_org;
ALTER TABLE tenancy_org NO FORCE ROW LEVEL SECURITY;
ALTER TABLE tenancy_org DISABLE ROW LEVEL SECURITY;
"""


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0002_row_level_security")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
