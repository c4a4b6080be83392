-- read_workflow_steps: a page of a tenant's workflow's steps, in id order after `after` (at most `limit`): each one's place and callback in the declaration, its item's kind, lane, status, attempts, unmet edges, error's first line and last change, its result's stored size and a preview of it (its first `preview` characters, none read when it is stored larger than `preview_bytes`), how many items it waits for (counted up to `cap` + 1) and the first `parents_shown` of them in id order, each with what its edge needs, its status (NULL: purged) and its place in this workflow (NULL: an item outside it)
-- The page is read from the steps' key first (MATERIALIZED: never by walking the items' key in id order), then each
-- step's item by its key; a page row whose item is not there comes back with NULLs, so a page is as long as the
-- page of steps it read. The tenant is named in every join (org_id): on the system login, a row another tenant
-- planted naming this workflow or its steps is not read as one of them. Each count of edges reads the edge index in
-- its order (ORDER BY): a callback's thousands of edges make the planner guess a scan of the table finds enough.
WITH page AS MATERIALIZED (
    SELECT s.*
      FROM workqueue_workflowstep s
     WHERE s.workflow_id = %(workflow_id)s::uuid AND s.org_id = %(org_id)s::uuid
       AND s.item_id > %(after)s::uuid
     ORDER BY s.item_id
     LIMIT %(limit)s
)
SELECT s.item_id, s.place, s.callback, w.id, w.kind, w.lane, w.status, w.attempts, w.max_attempts,
       w.waiting_on, split_part(btrim(w.last_error), E'\n', 1) AS error, w.updated_at,
       pg_column_size(w.result) AS result_bytes,
       CASE WHEN pg_column_size(w.result) <= %(preview_bytes)s
            THEN left(w.result::text, %(preview)s) END AS result_preview,
       (SELECT count(*)
          FROM (SELECT FROM workqueue_dependency d
                 WHERE d.child_id = w.id AND d.org_id = s.org_id
                 ORDER BY d.parent_id
                 LIMIT %(cap)s + 1) AS n) AS parents,
       (SELECT jsonb_agg(jsonb_build_array(p.parent_id, p.needs, pw.status, ps.place)
                         ORDER BY p.parent_id)::text
          FROM (SELECT d.parent_id, d.needs FROM workqueue_dependency d
                 WHERE d.child_id = w.id AND d.org_id = s.org_id
                 ORDER BY d.parent_id
                 LIMIT %(parents_shown)s) AS p
          LEFT JOIN workqueue_workitem pw ON pw.id = p.parent_id AND pw.org_id = s.org_id
          LEFT JOIN workqueue_workflowstep ps
                 ON ps.workflow_id = s.workflow_id AND ps.item_id = p.parent_id
                AND ps.org_id = s.org_id) AS first_parents
  FROM page s
  LEFT JOIN workqueue_workitem w
    ON w.id = s.item_id AND w.org_id = s.org_id AND w.workflow_id = s.workflow_id
 ORDER BY s.item_id
