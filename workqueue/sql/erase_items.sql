-- erase_items: delete up to batch of the tenant's items with ids after `after`, in id order, in the hot table and history (no ONLY: its children with it), with their attempts (history's too), their workflow edges and their places in their workflows, rows another transaction holds skipped; a claimed item only when forced; returns how many items and the last id it passed
-- In id order from where the batch before stopped, so the erase walks the item table's key once, never the rows it deleted before. The task records of the items deleted from the hot table go by that app's trigger, the rest by its own step.
WITH doomed AS (
    SELECT w.id FROM workqueue_workitem AS w
     WHERE w.id > %(after)s::uuid AND w.org_id = %(org_id)s::uuid
       AND (%(force)s::boolean OR w.status <> 'claimed')
     ORDER BY w.id
     LIMIT %(batch)s FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM workqueue_workitem AS w USING doomed WHERE w.id = doomed.id
    RETURNING w.id, w.has_dependents, w.workflow_id
), attempts_gone AS (
    DELETE FROM workqueue_attempt AS a USING gone WHERE a.item_id = gone.id
), parent_edges_gone AS (
    DELETE FROM workqueue_dependency AS d USING gone
     WHERE gone.has_dependents AND d.parent_id = gone.id
), child_edges_gone AS (
    DELETE FROM workqueue_dependency AS d USING gone
     WHERE gone.workflow_id IS NOT NULL AND d.child_id = gone.id
), steps_gone AS (
    DELETE FROM workqueue_workflowstep AS s USING gone
     WHERE gone.workflow_id IS NOT NULL AND s.workflow_id = gone.workflow_id AND s.item_id = gone.id
)
SELECT (SELECT count(*) FROM gone), (SELECT id FROM doomed ORDER BY id DESC LIMIT 1)
