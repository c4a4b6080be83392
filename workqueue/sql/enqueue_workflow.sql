-- enqueue_workflow: insert a workflow's steps (parallel arrays, one per column), each one's place and callback (workqueue_workflowstep) and its edges, in the tenant this statement names for its own transaction, marking the existing items its steps wait for as parents (and locking them); each step waits for its edges not met yet (an existing parent's as its status says once locked), or is pending when none is left (with its ready row); nothing is written when its first step exists (declared before under the workflow's key) or an existing parent is not found; announce the lanes of its pending steps on work_available (delivered at commit); returns whether it was fresh and written, the parents found and the steps inserted
-- An existing parent's status is read as its row lock leaves it (the UPDATE waits for a settle in flight and reads
-- what it wrote): ended as an edge needs, that edge is met now and not counted; not ended, the statement that ends it
-- will see the edge (workqueue_move_dependents_v3 reads a fresh snapshot) and move the step then.
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), fresh AS MATERIALIZED (
    SELECT NOT EXISTS (SELECT FROM workqueue_workitem w WHERE w.id = %(anchor)s::uuid) AS yes
      FROM tenant
), parents AS (
    UPDATE workqueue_workitem AS w
       SET has_dependents = true
     WHERE w.id = ANY(%(parent_items)s::uuid[]) AND (SELECT yes FROM fresh)
    RETURNING w.id, w.status
), writable AS MATERIALIZED (
    SELECT f.yes AND (SELECT count(*) FROM parents) = cardinality(%(parent_items)s::uuid[]) AS yes
      FROM fresh f
), edge AS (
    SELECT *
      FROM unnest(%(edge_parents)s::uuid[], %(edge_children)s::uuid[], %(edge_needs)s::text[])
           AS e(parent_id, child_id, needs)
), met AS (
    SELECT e.child_id, count(*)::integer AS edges
      FROM edge e JOIN parents p ON p.id = e.parent_id
     WHERE p.status = 'done'
        OR (e.needs = 'finished' AND p.status IN ('failed', 'cancelled', 'discarded'))
     GROUP BY e.child_id
), steps AS (
{enqueue_many_rows}
      LEFT JOIN met m ON m.child_id = i.id
     WHERE (SELECT yes FROM writable)
    ON CONFLICT DO NOTHING
    RETURNING id, org_id, lane, kind, priority, available_at, concurrency_key, rate_key, status
), made_pending AS (
    SELECT * FROM steps
), {ready_rows}, placed AS (
    INSERT INTO workqueue_workflowstep (org_id, workflow_id, item_id, place, callback)
    SELECT %(org_id)s::uuid, %(anchor)s::uuid, s.id, (o.place - 1)::integer, c.which
      FROM steps s
      JOIN unnest(%(id)s::uuid[]) WITH ORDINALITY AS o(id, place) ON o.id = s.id
      LEFT JOIN unnest(%(callback_ids)s::uuid[], %(callback_kinds)s::text[]) AS c(id, which)
             ON c.id = s.id
    ON CONFLICT DO NOTHING
), edges AS (
    INSERT INTO workqueue_dependency (org_id, parent_id, child_id, needs)
    SELECT %(org_id)s::uuid, e.parent_id, e.child_id, e.needs
      FROM edge e
     WHERE (SELECT yes FROM writable)
    ON CONFLICT DO NOTHING
), announced AS (
    SELECT pg_notify('work_available', l.lane)
      FROM (SELECT DISTINCT s.lane FROM steps s WHERE s.status = 'pending') AS l
)
SELECT (SELECT yes FROM fresh) AS fresh, (SELECT yes FROM writable) AS written,
       (SELECT count(*) FROM parents) AS parents, (SELECT count(*) FROM steps) AS steps,
       (SELECT count(*) FROM announced) AS announced
