-- claim_contexts_open: what each claimed row (c) needs for its context when the site names its tenants (one implicit tenant, or its own): every tenant is live, and an author keeps the member role
SELECT c.*,
       TRUE AS tenancy_live,
       NULL::text AS tenancy_role
  FROM claimed c
