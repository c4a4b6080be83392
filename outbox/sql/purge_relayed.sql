-- purge_relayed: delete up to batch relayed outbox rows relayed before `before` from the table itself, in every tenant (those in history go with their span's child); returns how many
WITH doomed AS (
    SELECT id
      FROM ONLY workqueue_outbox_outboxrow
     WHERE status = 'relayed' AND relayed_at < %(before)s::timestamptz
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM ONLY workqueue_outbox_outboxrow AS o USING doomed WHERE o.id = doomed.id RETURNING 1
)
SELECT count(*) FROM gone
