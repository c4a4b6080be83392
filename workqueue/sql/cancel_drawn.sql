-- cancel_drawn: cancel the tenant's items as the operator saw them: a pending one (same status and updated_at) at once, a claimed one (still claimed: its updated_at moves at every lease renewal) by asking its holder; appends a work.cancelled or work.cancel_requested audit entry per item naming the operator
WITH drawn AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(statuses)s::text[], %(updated_ats)s::timestamptz[])
                  AS t(id, status, updated_at)
), seen AS (
    SELECT w.id, w.status AS status_before
      FROM workqueue_workitem w
      JOIN drawn d ON w.id = d.id AND w.status = d.status
     WHERE w.cancel_requested_at IS NULL
       AND ((w.status = 'pending' AND w.updated_at = d.updated_at) OR w.status = 'claimed')
       FOR UPDATE OF w
), moved AS (
    UPDATE workqueue_workitem AS w
       SET status = CASE WHEN seen.status_before = 'pending' THEN 'cancelled' ELSE 'claimed' END,
           cancel_requested_at = now(), updated_at = now(), updated_by = {system_actor}
      FROM seen
     WHERE w.id = seen.id AND w.status = seen.status_before AND w.cancel_requested_at IS NULL
    RETURNING w.*, seen.status_before
), entries AS (
    SELECT m.org_id,
           CASE WHEN m.status = 'cancelled' THEN 'work.cancelled' ELSE 'work.cancel_requested' END
               AS action,
           'workqueue.workitem' AS subject_type, m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'status', m.status_before, 'attempts', m.attempts,
                              'claimed_by', m.claimed_by, 'payload', m.payload) AS data
      FROM moved m
), audited AS (
{append_entries}
)
SELECT * FROM moved
