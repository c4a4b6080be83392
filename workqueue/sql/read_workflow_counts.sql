-- read_workflow_counts: how many steps a tenant's workflow has (its declared steps, workqueue_workflowstep: a NULL status) and how many of them are in each status but done (through the items' workflow index, which holds no done step: the rest are done)
SELECT NULL::text AS status, count(*) AS steps
  FROM workqueue_workflowstep s
 WHERE s.workflow_id = %(workflow_id)s::uuid AND s.org_id = %(org_id)s::uuid
UNION ALL
SELECT w.status, count(*)
  FROM workqueue_workitem w
 WHERE w.workflow_id = %(workflow_id)s::uuid AND w.org_id = %(org_id)s::uuid
   AND w.status IN ('waiting', 'pending', 'claimed', 'failed', 'discarded', 'cancelled')
 GROUP BY w.status
