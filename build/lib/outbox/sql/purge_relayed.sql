-- purge_relayed: delete up to batch relayed outbox rows relayed before `before`, in every tenant; returns how many
WITH doomed AS (
    SELECT id
      FROM workqueue_outbox_outboxrow
     WHERE status = 'relayed' AND relayed_at < %(before)s::timestamptz
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM workqueue_outbox_outboxrow AS o USING doomed WHERE o.id = doomed.id RETURNING 1
)
SELECT count(*) FROM gone
