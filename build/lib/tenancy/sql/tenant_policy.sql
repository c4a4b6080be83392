-- tenant_policy: a login sees and writes only the rows of the tenant its transaction names
-- (app.org_id); FORCE makes the table's owner obey too. NULLIF: after a transaction that set
-- the tenant, the setting reads '' rather than NULL, and ''::uuid would raise.
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON {table}
    USING ({column} = NULLIF(current_setting('app.org_id', true), '')::uuid)
    WITH CHECK ({column} = NULLIF(current_setting('app.org_id', true), '')::uuid);
-- The login that owns the table (the one migrating) sees every tenant while its transaction
-- says so (app.all_tenants): the named tenant-less operations of a site whose one login owns
-- its tables. No other login gains anything by naming it, and the owner could turn row-level
-- security off anyway; the everyday login of the orgs tenancy owns nothing.
CREATE POLICY owner_all_tenants ON {table} TO CURRENT_USER
    USING (current_setting('app.all_tenants', true) = 'on')
    WITH CHECK (current_setting('app.all_tenants', true) = 'on');
