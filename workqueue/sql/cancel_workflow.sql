-- cancel_workflow: cancel every step of the tenant's workflow that has not ended, in id order: a waiting or pending one at once (status cancelled, the reason as its last error), a claimed one by asking its holder (cancel_requested_at, which its next lease renewal reports); appends a work.cancelled or work.cancel_requested audit entry per step naming the actor, with the reason; returns the steps it changed
WITH seen AS (
    SELECT w.id, w.status AS status_before, %(reason)s::text AS reason
      FROM workqueue_workitem w
     WHERE w.workflow_id = %(workflow_id)s::uuid
       AND w.status IN ('waiting', 'pending', 'claimed') AND w.cancel_requested_at IS NULL
     ORDER BY w.id
       FOR UPDATE
), {cancel_seen}
)
SELECT m.* FROM moved m, (SELECT count(*) FROM dependents) AS r, (SELECT count(*) FROM forgotten) AS f
