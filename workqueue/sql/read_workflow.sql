-- read_workflow: the tenant's workflow's first step (its id is the workflow's), however the workflow's steps ended (none: no such workflow in this tenant)
SELECT * FROM workqueue_workitem
 WHERE id = %(workflow_id)s::uuid AND workflow_id = %(workflow_id)s::uuid
