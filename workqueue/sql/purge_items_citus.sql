-- purge_items_citus: purge_items' Citus form (WORKQUEUE['CITUS']): delete up to batch of one tenant's items of the given statuses last changed before `before`, with their attempts, their workflow edges and their places in their workflows, as purge_items does; every table filtered by the tenant, so Citus routes it whole to the tenant's node (FOR UPDATE across nodes is refused); returns how many items
WITH doomed AS (
    {locking}
), gone AS (
    DELETE FROM workqueue_workitem AS w USING doomed
     WHERE w.org_id = %(org_id)s::uuid AND w.id = doomed.id
    RETURNING w.id, w.has_dependents, w.workflow_id
), attempts_gone AS (
    DELETE FROM workqueue_attempt AS a USING gone
     WHERE a.org_id = %(org_id)s::uuid AND a.item_id = gone.id
), parent_edges_gone AS (
    DELETE FROM workqueue_dependency AS d USING gone
     WHERE d.org_id = %(org_id)s::uuid AND gone.has_dependents AND d.parent_id = gone.id
), child_edges_gone AS (
    DELETE FROM workqueue_dependency AS d USING gone
     WHERE d.org_id = %(org_id)s::uuid AND gone.workflow_id IS NOT NULL AND d.child_id = gone.id
), steps_gone AS (
    DELETE FROM workqueue_workflowstep AS s USING gone
     WHERE s.org_id = %(org_id)s::uuid AND gone.workflow_id IS NOT NULL
       AND s.workflow_id = gone.workflow_id AND s.item_id = gone.id
)
SELECT count(*) FROM gone
