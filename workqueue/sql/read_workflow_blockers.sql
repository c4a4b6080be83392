-- read_workflow_blockers: the steps of a tenant's workflow that hold others up: its dead ones (failed; the first `limit` in id order, each listed even when nothing waits for it) and, of its first `scan` cancelled or discarded steps that are parents, those some waiting step still needs done; each with its place, kind, error's first line, last change, and how many waiting items need it done (counted up to `cap` + 1). A dead step requeued and done lets them go on; a cancelled or discarded one never will
WITH ended AS (
    (SELECT w.* FROM workqueue_workitem w
      WHERE w.workflow_id = %(workflow_id)s::uuid AND w.org_id = %(org_id)s::uuid
        AND w.status = 'failed'
      ORDER BY w.id
      LIMIT %(limit)s)
    UNION ALL
    (SELECT w.* FROM workqueue_workitem w
      WHERE w.workflow_id = %(workflow_id)s::uuid AND w.org_id = %(org_id)s::uuid
        AND w.status IN ('cancelled', 'discarded') AND w.has_dependents
      ORDER BY w.id
      LIMIT %(scan)s)
)
SELECT e.id, e.status, e.kind, s.place, split_part(btrim(e.last_error), E'\n', 1) AS error,
       e.updated_at, h.waiting
  FROM ended e
  LEFT JOIN workqueue_workflowstep s
         ON s.workflow_id = e.workflow_id AND s.item_id = e.id AND s.org_id = e.org_id
 CROSS JOIN LATERAL (
    SELECT count(*) AS waiting
      FROM (SELECT FROM workqueue_dependency d
              JOIN workqueue_workitem c ON c.id = d.child_id AND c.org_id = d.org_id
             WHERE e.has_dependents AND d.parent_id = e.id AND d.org_id = e.org_id
               AND d.needs = 'done' AND c.status = 'waiting'
             LIMIT %(cap)s + 1) AS x
 ) h
 WHERE e.status = 'failed' OR h.waiting > 0
 ORDER BY e.status = 'failed' DESC, e.id
 LIMIT %(limit)s
