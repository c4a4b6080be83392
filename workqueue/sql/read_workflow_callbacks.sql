-- read_workflow_callbacks: the first `limit` group callbacks (on_success, on_complete) of a tenant's workflow, in id order, as they are now: each one's place, which callback, item, kind, status, unmet edges, attempts, last change, and how many items it waits for (counted up to `cap` + 1)
SELECT s.place, s.callback, w.id, w.kind, w.status, w.waiting_on, w.attempts, w.updated_at,
       (SELECT count(*)
          FROM (SELECT FROM workqueue_dependency d
                 WHERE d.child_id = w.id AND d.org_id = s.org_id
                 ORDER BY d.parent_id
                 LIMIT %(cap)s + 1) AS n) AS parents
  FROM workqueue_workflowstep s
  JOIN workqueue_workitem w
    ON w.id = s.item_id AND w.org_id = s.org_id AND w.workflow_id = s.workflow_id
 WHERE s.workflow_id = %(workflow_id)s::uuid AND s.org_id = %(org_id)s::uuid
   AND s.callback IS NOT NULL
 ORDER BY s.item_id
 LIMIT %(limit)s
