-- count_parents: how many of the tenant's items one item waits for (its parents: a group's members for its callback) are in each status
SELECT w.status, count(*) AS parents
  FROM workqueue_dependency d
  JOIN workqueue_workitem w ON w.id = d.parent_id
 WHERE d.child_id = %(child_id)s::uuid
 GROUP BY w.status
