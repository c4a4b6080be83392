-- purge_items: delete up to batch items of the given statuses last changed before `before`, in every tenant, with their attempts, their workflow edges and their places in their workflows (the locking subquery is the queryset workqueue/maintenance.py compiles); returns how many items
-- An item's edges as a parent (has_dependents) and as a child (only a workflow's steps have parents): a plain item's
-- purge reads no edge. An edge whose parent and child go in one batch is deleted once (the second delete skips it).
WITH doomed AS (
    {locking}
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
SELECT count(*) FROM gone
