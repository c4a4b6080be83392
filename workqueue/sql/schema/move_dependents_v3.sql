-- move_dependents_v3: move each waiting child of the given parents by their edges that need what `edge_needs` lists: delta -1 when the parents have just ended so (the edges are met), +1 when a dead parent is requeued (what needs it finished waits for it again); a child that reaches 0 becomes pending (due now, or at its own later available_at) and its lane is announced on work_available; only waiting children move (one released, cancelled or run already is left as it is); returns how many children became pending; a child made pending gets its ready row (workqueue_ready: v2's children, made pending without one, are given theirs by the ring's rotation)
-- A function, called by every statement that ends or requeues an item (sql/move_dependents.sql), for one reason: it
-- is VOLATILE, so under READ COMMITTED its statement reads a snapshot taken when it runs, after the calling statement
-- has locked the parents. A workflow declared meanwhile with an edge to one of them locked that parent before the
-- calling statement could, and committed before it got the lock: the calling statement's own snapshot, taken when it
-- began, would not see that edge (nor its child), and the edge would never be met.
-- An edge is never written here: whether it is met follows from its parent's status (done meets every edge; failed,
-- cancelled or discarded those needing finished), and each parent reaches each status once between requeues, so the
-- edges counted are the edges that status change met (or, requeued, unmet).
-- PL/pgSQL with its generic plan: planned once per session, not at every call (planning this statement cost more
-- than running it for a batch of 100 parents); every lookup is by key, right at any size.
-- Children are locked in id order (the sorted children drive the lock, one key lookup each), so two statements moving
-- the same children (members of two groups completed in two batches) wait for each other instead of deadlocking. A
-- child's row lock orders the statements that move it, and each reads the count the one before it left: exactly one
-- takes it to 0.
-- SECURITY INVOKER (the default): it reads and writes as its caller, under the caller's row-level security. The callers
-- that end items run on the system login, which sees every tenant: a child moves only by the edges of its own tenant
-- (a tenant may write edges in its own name between any ids it likes; v1 moved another tenant's child by such an
-- edge). The child's row is read anyway; the parent's is not (its lookup cost a group member's completion a tenth):
-- an edge in a tenant's name from another tenant's item moves only that tenant's own child, and only if that item is
-- a parent in its own tenant's workflows.
CREATE FUNCTION workqueue_move_dependents_v3(parent_ids uuid[], edge_needs text[], delta integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    made_pending integer;
BEGIN
    WITH counted AS (
        SELECT d.child_id, d.org_id, count(*)::integer AS edges
          FROM workqueue_dependency AS d
         WHERE d.parent_id = ANY(parent_ids) AND d.needs = ANY(edge_needs)
         GROUP BY d.child_id, d.org_id
    ), locked AS MATERIALIZED (
        SELECT c.id
          FROM (SELECT k.child_id, k.org_id FROM counted AS k ORDER BY k.child_id) AS m,
               LATERAL (SELECT w.id FROM workqueue_workitem AS w
                         WHERE w.id = m.child_id AND w.org_id = m.org_id AND w.status = 'waiting'
                           FOR UPDATE) AS c
    ), moved AS (
        UPDATE workqueue_workitem AS c
           SET waiting_on = c.waiting_on + delta * m.edges,
               status = CASE WHEN c.waiting_on + delta * m.edges = 0 THEN 'pending'
                             ELSE 'waiting' END,
               available_at = CASE WHEN c.waiting_on + delta * m.edges = 0
                                   THEN GREATEST(c.available_at, now()) ELSE c.available_at END,
               updated_at = now(), ringed_at = now(), updated_by = {system_actor}
          FROM counted AS m, locked AS l
         WHERE c.id = m.child_id AND c.org_id = m.org_id AND l.id = c.id AND c.status = 'waiting'
        RETURNING c.*
    ), readied AS (
        INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at, concurrency_key,
                                     rate_key)
        SELECT workqueue_ready_slot(x.available_at), x.id, x.org_id, x.lane, x.kind, x.priority, x.available_at,
               x.concurrency_key, x.rate_key
          FROM moved AS x
         WHERE x.status = 'pending'
    ), announced AS (
        SELECT pg_notify('work_available', r.lane)
          FROM (SELECT DISTINCT x.lane FROM moved AS x WHERE x.status = 'pending') AS r
    )
    SELECT (count(*) FILTER (WHERE x.status = 'pending'))::integer
      INTO made_pending
      FROM moved AS x, (SELECT count(*) FROM announced) AS a;
    RETURN made_pending;
END
$fn$;
