-- grants (tenancy): the everyday login reads its own org and its members, under row-level
-- security; it changes neither (orgs and memberships are managed through the system login).
GRANT SELECT ON tenancy_org, tenancy_membership TO {app};
