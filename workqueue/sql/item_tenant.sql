-- item_tenant: the tenant of an item, by its id, across tenants (the operator's cancel by id, from the command line, names no tenant)
SELECT org_id FROM workqueue_workitem WHERE id = %(id)s::uuid
