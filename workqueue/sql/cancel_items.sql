-- cancel_items: cancel the tenant's items by id: a waiting or pending one at once (status cancelled: never claimed), a claimed one by asking its holder (cancel_requested_at, which its next lease renewal reports); appends a work.cancelled or work.cancel_requested audit entry per item naming the actor; an item already final, or already asked, is left as it is
WITH seen AS (
    SELECT w.id, w.status AS status_before, NULL::text AS reason
      FROM workqueue_workitem w
     WHERE w.id = ANY(%(ids)s::uuid[])
       AND w.status IN ('waiting', 'pending', 'claimed') AND w.cancel_requested_at IS NULL
       FOR UPDATE
), {cancel_seen}
)
SELECT m.* FROM moved m, (SELECT count(*) FROM dependents) AS r, (SELECT count(*) FROM forgotten) AS f
