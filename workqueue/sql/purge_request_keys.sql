-- purge_request_keys: delete up to batch stored Idempotency-Key answers created before `before` from the table itself, in every tenant (those in history go with their span's child); returns how many
WITH doomed AS (
    SELECT id
      FROM ONLY workqueue_storedresponse
     WHERE created_at < %(before)s::timestamptz
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM ONLY workqueue_storedresponse AS s USING doomed WHERE s.id = doomed.id RETURNING 1
)
SELECT count(*) FROM gone
