-- tenant_policy: a login sees and writes only the rows of the tenant its transaction names
-- (app.org_id); FORCE makes the table's owner obey too. NULLIF: after a transaction that set
-- the tenant, the setting reads '' rather than NULL, and ''::uuid would raise.
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON {table}
    USING (org_id = NULLIF(current_setting('app.org_id', true), '')::uuid)
    WITH CHECK (org_id = NULLIF(current_setting('app.org_id', true), '')::uuid);
