-- ready_rows: write the ready row (workqueue_ready: its slot in the ring, and what the claim orders and filters by) of each item of the including statement's `made_pending` that is pending; the one spelling of a ready row, for every statement that makes an item pending (which also sets its ringed_at to its updated_at)
readied AS (
    INSERT INTO workqueue_ready (slot, id, org_id, lane, kind, priority, available_at, concurrency_key, rate_key)
    SELECT workqueue_ready_slot(p.available_at), p.id, p.org_id, p.lane, p.kind, p.priority, p.available_at,
           p.concurrency_key, p.rate_key
      FROM made_pending p
     WHERE p.status = 'pending'
)
