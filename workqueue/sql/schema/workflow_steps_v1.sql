-- workflow_steps_v1: a workflow step row for every step declared before the table was (their places and callbacks were not kept: NULL), every tenant's (the owner's policy lets the migrating login see them while its transaction names app.all_tenants: tenancy/sql/tenant_policy.sql)
SELECT set_config('app.all_tenants', 'on', true);
INSERT INTO workqueue_workflowstep (org_id, workflow_id, item_id, place, callback)
SELECT w.org_id, w.workflow_id, w.id, NULL, NULL
  FROM workqueue_workitem w
 WHERE w.workflow_id IS NOT NULL
ON CONFLICT DO NOTHING;
