-- release_dependents_v1: meet the unmet edges of the given parents (every edge when they are done, else only those needing 'finished'), take the edges met off each waiting child's waiting_on (once per child, however many of its parents end here), make a child that reaches 0 pending (due now, or at its own later available_at) and announce its lane on work_available; returns how many children became pending
-- A function, called by every statement that ends an item (sql/release_dependents.sql), for one reason: it is
-- VOLATILE, so under READ COMMITTED its statement reads a snapshot taken when it runs, after the calling statement
-- has locked the parents. A workflow declared meanwhile with an edge to one of them locked that parent before this
-- statement could, and committed before it got the lock: the calling statement's own snapshot, taken when it began,
-- would not see that edge (nor its child), and the edge would never be met.
-- Children are locked in id order, so two statements releasing the same children (members of two groups completed
-- in two batches) wait for each other instead of deadlocking. A child's row lock orders the statements that meet
-- its edges, and each reads the count the one before it left: exactly one takes it to 0.
-- SECURITY INVOKER (the default): it reads and writes as its caller, under the caller's row-level security.
CREATE FUNCTION workqueue_release_dependents_v1(parents uuid[], done boolean) RETURNS integer
LANGUAGE sql VOLATILE AS $fn$
WITH met AS (
    UPDATE workqueue_dependency AS d
       SET met = true
     WHERE d.parent_id = ANY(parents) AND NOT d.met AND (done OR d.needs = 'finished')
    RETURNING d.child_id
), counted AS (
    SELECT child_id, count(*)::integer AS edges FROM met GROUP BY child_id
), locked AS MATERIALIZED (
    SELECT c.id
      FROM workqueue_workitem AS c
     WHERE c.id IN (SELECT child_id FROM counted) AND c.status = 'waiting'
     ORDER BY c.id
       FOR UPDATE OF c
), released AS (
    UPDATE workqueue_workitem AS c
       SET waiting_on = c.waiting_on - m.edges,
           status = CASE WHEN c.waiting_on - m.edges = 0 THEN 'pending' ELSE 'waiting' END,
           available_at = CASE WHEN c.waiting_on - m.edges = 0
                               THEN GREATEST(c.available_at, now()) ELSE c.available_at END,
           updated_at = now(), updated_by = {system_actor}
      FROM counted AS m, locked AS l
     WHERE c.id = m.child_id AND l.id = c.id AND c.status = 'waiting'
    RETURNING c.status, c.lane
), announced AS (
    SELECT pg_notify('work_available', l.lane)
      FROM (SELECT DISTINCT lane FROM released WHERE status = 'pending') AS l
)
SELECT (count(*) FILTER (WHERE status = 'pending'))::integer
  FROM released, (SELECT count(*) FROM announced) AS a
$fn$;
