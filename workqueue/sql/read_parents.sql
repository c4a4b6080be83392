-- read_parents: a page of the tenant's items one item waits for (its parents, by its edges: a group's members for its callback), in id order after `after`: each one's id, kind and status, what the edge needs and whether it is met (done meets every edge; failed, cancelled or discarded those needing finished), and its result (JSON text, NULL when none)
SELECT d.parent_id AS id, w.kind, w.status, d.needs,
       (w.status = 'done'
        OR (d.needs = 'finished' AND w.status IN ('failed', 'cancelled', 'discarded'))) AS met,
       w.result::text AS result
  FROM workqueue_dependency d
  JOIN workqueue_workitem w ON w.id = d.parent_id
 WHERE d.child_id = %(child_id)s::uuid AND d.parent_id > %(after)s::uuid
 ORDER BY d.parent_id
 LIMIT %(limit)s
