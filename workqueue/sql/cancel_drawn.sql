-- cancel_drawn: cancel the tenant's items as the operator saw them: a waiting or pending one (same status and updated_at) at once, a claimed one (still claimed: its updated_at moves at every lease renewal) by asking its holder; appends a work.cancelled or work.cancel_requested audit entry per item naming the operator
WITH drawn AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(statuses)s::text[], %(updated_ats)s::timestamptz[])
                  AS t(id, status, updated_at)
), seen AS (
    SELECT w.id, w.status AS status_before, NULL::text AS reason
      FROM workqueue_workitem w
      JOIN drawn d ON w.id = d.id AND w.status = d.status
     WHERE w.cancel_requested_at IS NULL
       AND ((w.status IN ('waiting', 'pending') AND w.updated_at = d.updated_at)
            OR w.status = 'claimed')
       FOR UPDATE OF w
), {cancel_seen}
)
SELECT m.* FROM moved m, (SELECT count(*) FROM dependents) AS r, (SELECT count(*) FROM forgotten) AS f
