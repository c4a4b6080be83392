-- count_workflow: how many steps the tenant's workflow has, by status (none: no such workflow in this tenant)
SELECT w.status, count(*) AS steps
  FROM workqueue_workitem w
 WHERE w.workflow_id = %(workflow_id)s::uuid
 GROUP BY w.status
