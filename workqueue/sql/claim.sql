-- claim: lock up to limit pending, due items of the lane (and kinds), skipping rows another claimer holds; each gets a fresh token, a lease, and one attempt spent
WITH picked AS (
    SELECT id
      FROM workqueue_workitem
     WHERE status = 'pending'
       AND lane = %(lane)s
       AND available_at <= now()
       AND (%(any_kind)s OR kind = ANY(%(kinds)s::text[]))
     ORDER BY priority DESC, available_at, id
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE workqueue_workitem AS w
   SET status = 'claimed',
       claimed_by = %(worker_id)s,
       claim_token = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => %(lease_s)s),
       attempts = w.attempts + 1,
       updated_at = now(),
       updated_by = '00000000-0000-0000-0000-000000000000'
  FROM picked
 WHERE w.id = picked.id
RETURNING w.*
