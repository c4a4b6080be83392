-- enqueue_workflow: insert a workflow's steps (parallel arrays, one per column: each waiting for its parents, or pending) and its edges, in the tenant this statement names for its own transaction, marking the existing items its steps wait for as parents (locking them) and meeting at once the edges of those that have ended; nothing is written when its first step exists (declared before under the workflow's key) or an existing parent is not found; announce the lanes of its steps that wait for nothing on work_available (delivered at commit); returns whether it was fresh and written, the parents found, the steps inserted
-- An existing parent's status is read as its row lock leaves it (the UPDATE waits for a settle in flight and reads
-- what it wrote): ended, its edges are met here by the same function that meets them when an item ends; not ended,
-- the statement that ends it will see these edges (workqueue_release_dependents_v1 reads a fresh snapshot).
-- The release runs once every step and edge is in (it reads their counts first), and sees them: it runs after them
-- in this statement's transaction.
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
), ready AS MATERIALIZED (
    SELECT f.yes AND (SELECT count(*) FROM parents) = cardinality(%(parent_items)s::uuid[]) AS yes
      FROM fresh f
), steps AS (
{enqueue_many_rows}
     WHERE (SELECT yes FROM ready)
    ON CONFLICT DO NOTHING
    RETURNING 1
), edges AS (
    INSERT INTO workqueue_dependency (org_id, parent_id, child_id, needs, met)
    SELECT %(org_id)s::uuid, e.parent_id, e.child_id, e.needs, false
      FROM unnest(%(edge_parents)s::uuid[], %(edge_children)s::uuid[], %(edge_needs)s::text[])
           AS e(parent_id, child_id, needs)
     WHERE (SELECT yes FROM ready)
    ON CONFLICT DO NOTHING
    RETURNING 1
), written AS MATERIALIZED (
    SELECT (SELECT count(*) FROM steps) AS steps, (SELECT count(*) FROM edges) AS edges
), released AS (
    SELECT workqueue_release_dependents_v1(
               array_agg(p.id) FILTER (WHERE p.status = 'done'), true)
         + workqueue_release_dependents_v1(
               array_agg(p.id) FILTER (WHERE p.status IN ('failed', 'cancelled', 'discarded')),
               false) AS pending
      FROM parents p, written
     WHERE (SELECT yes FROM ready)
    HAVING bool_or(p.status IN ('done', 'failed', 'cancelled', 'discarded'))
), announced AS (
    SELECT pg_notify('work_available', l.lane)
      FROM unnest(%(lanes)s::text[]) AS l(lane)
     WHERE (SELECT yes FROM ready)
)
SELECT (SELECT yes FROM fresh) AS fresh, (SELECT yes FROM ready) AS written,
       (SELECT count(*) FROM parents) AS parents, w.steps,
       (SELECT count(*) FROM released) AS released, (SELECT count(*) FROM announced) AS announced
  FROM written w
