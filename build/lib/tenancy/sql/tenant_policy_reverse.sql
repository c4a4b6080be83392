-- tenant_policy_reverse: undo tenant_policy.
DROP POLICY IF EXISTS owner_all_tenants ON {table};
DROP POLICY IF EXISTS tenant_isolation ON {table};
ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;
