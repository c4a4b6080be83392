-- ready_row_citus: write the ready row of the item enqueue_citus just inserted, if it is still pending (Citus pushes it down to the tenant's node: both tables are distributed by org_id and colocated); a pending item left without one, by a crash between the two, is adopted by the ring's next turn (rotate_ready)
INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at, concurrency_key, rate_key)
SELECT workqueue_ready_slot(w.available_at), w.id, w.org_id, w.lane, w.kind, w.priority, w.available_at,
       w.concurrency_key, w.rate_key
  FROM workqueue_workitem w
 WHERE w.org_id = %(org_id)s::uuid
   AND w.id = %(id)s::uuid
   AND w.status = 'pending'
