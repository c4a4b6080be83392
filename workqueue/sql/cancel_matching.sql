-- cancel_matching: cancel up to batch items of one kind (and lane, and statuses; in one tenant or, with org_id null on the system login, every tenant) as cancel_items does each (meeting the edges a cancelled one ends, forgetting a pending one's ready row), skipping rows another transaction has locked (a later batch or run takes them); appends an audit entry per item naming the actor; returns how many were cancelled and how many holders were asked
WITH seen AS (
    SELECT w.id, w.status AS status_before
      FROM workqueue_workitem w
     WHERE w.kind = %(kind)s::text
       AND (%(lane)s::text IS NULL OR w.lane = %(lane)s::text)
       AND (%(org_id)s::uuid IS NULL OR w.org_id = %(org_id)s::uuid)
       AND w.status = ANY(%(statuses)s::text[]) AND w.status IN ('waiting', 'pending', 'claimed')
       AND w.cancel_requested_at IS NULL
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE workqueue_workitem AS w
       SET status = CASE WHEN seen.status_before = 'claimed' THEN 'claimed' ELSE 'cancelled' END,
           cancel_requested_at = now(), updated_at = now(), updated_by = {system_actor}
      FROM seen
     WHERE w.id = seen.id
    RETURNING w.*, seen.status_before
), entries AS (
    SELECT m.org_id,
           CASE WHEN m.status = 'cancelled' THEN 'work.cancelled' ELSE 'work.cancel_requested' END
               AS action,
           'workqueue.workitem' AS subject_type, m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'status', m.status_before, 'attempts', m.attempts,
                              'claimed_by', m.claimed_by, 'payload', m.payload,
                              'bulk', true) AS data
      FROM moved m
), audited AS (
{append_entries}
), parent_items AS (
    SELECT m.id, m.has_dependents FROM moved m WHERE m.status = 'cancelled'
), {forget_ready}, {move_dependents}
SELECT count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
       count(*) FILTER (WHERE status = 'claimed') AS requested
  FROM moved, (SELECT count(*) FROM dependents) AS r, (SELECT count(*) FROM forgotten) AS f
