-- read_holding: of the given items, each that is a workflow's step or that some item waits for: its own workflow, how many waiting items need it done (counted up to `cap` + 1) and the workflows of up to 3 of them (a dead letter's page and list: what requeueing it lets go on)
SELECT x.id, x.workflow_id, COALESCE(h.waiting, 0) AS waiting, h.workflows
  FROM workqueue_workitem x
  LEFT JOIN LATERAL (
    SELECT count(*) AS waiting,
           (array_agg(DISTINCT c.workflow_id) FILTER (WHERE c.workflow_id IS NOT NULL))[1:3]
               AS workflows
      FROM (SELECT c.workflow_id
              FROM workqueue_dependency d
              JOIN workqueue_workitem c ON c.id = d.child_id AND c.org_id = d.org_id
             WHERE d.parent_id = x.id AND d.org_id = x.org_id
               AND d.needs = 'done' AND c.status = 'waiting'
             LIMIT %(cap)s + 1) AS c
  ) h ON x.has_dependents
 WHERE x.id = ANY(%(ids)s::uuid[]) AND (x.workflow_id IS NOT NULL OR x.has_dependents)
