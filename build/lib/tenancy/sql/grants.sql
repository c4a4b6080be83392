-- grants (tenancy): the everyday login reads its own org and its members, under row-level
-- security; it changes neither (orgs and memberships are managed through the system login).
GRANT SELECT ON workqueue_tenancy_org, workqueue_tenancy_membership TO {app};
