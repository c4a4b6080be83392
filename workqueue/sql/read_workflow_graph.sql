-- read_workflow_graph: a tenant's workflow's steps in id order (at most `limit`), each with its place and callback in the declaration, its item's kind and status (NULL: its item is not there) and the items it waits for (their ids, and what each edge needs of it, in parent id order): what its graph is drawn, or its levels counted, from
-- The steps are read from the steps' key first (MATERIALIZED, as read_workflow_steps does), then each step's item
-- and its edges by their keys (the edges' child index); the tenant is named in every join (org_id), so a row
-- another tenant planted is never read as this workflow's.
WITH steps AS MATERIALIZED (
    SELECT s.*
      FROM workqueue_workflowstep s
     WHERE s.workflow_id = %(workflow_id)s::uuid AND s.org_id = %(org_id)s::uuid
     ORDER BY s.item_id
     LIMIT %(limit)s
)
SELECT s.item_id, s.place, s.callback, w.kind, w.status,
       coalesce(e.parents, '{}') AS parents, coalesce(e.needs, '{}') AS needs
  FROM steps s
  LEFT JOIN workqueue_workitem w
    ON w.id = s.item_id AND w.org_id = s.org_id AND w.workflow_id = s.workflow_id
  LEFT JOIN LATERAL (
    SELECT array_agg(d.parent_id ORDER BY d.parent_id) AS parents,
           array_agg(d.needs::text ORDER BY d.parent_id) AS needs
      FROM workqueue_dependency d
     WHERE d.child_id = s.item_id AND d.org_id = s.org_id
  ) e ON true
 ORDER BY s.item_id
