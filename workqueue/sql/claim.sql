-- claim: lock up to limit pending, due items of the lane (and kinds), skipping rows another claimer holds; each gets a fresh token, a lease, and one attempt spent
-- Each row comes back with what its context needs (tenancy_live, tenancy_role: the lookup tenancy.services.CONTEXTS_SQL
-- spells too; tests/contract/test_claim_and_settle.py holds the two together), so a claim costs one round trip.
-- The claim commits without waiting for its WAL flush (synchronous_commit off, this transaction
-- only): a claim lost to a database crash only hands the item out again, and the completion that
-- follows commits synchronously, which flushes the claim's WAL record before its own.
WITH quick_commit AS MATERIALIZED (
    SELECT set_config('synchronous_commit', 'off', true) AS setting
), picked AS (
    SELECT id
      FROM workqueue_workitem
     WHERE status = 'pending'
       AND lane = %(lane)s
       AND available_at <= now()
       AND (%(any_kind)s OR kind = ANY(%(kinds)s::text[]))
     ORDER BY priority DESC, available_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), claimed AS (
UPDATE workqueue_workitem AS w
   SET status = 'claimed',
       claimed_by = %(worker_id)s,
       claim_token = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => %(lease_s)s),
       attempts = w.attempts + 1,
       updated_at = now(),
       updated_by = '00000000-0000-0000-0000-000000000000'
  FROM picked, quick_commit
 WHERE w.id = picked.id
RETURNING w.*
)
SELECT c.*,
       o.id IS NOT NULL AND o.gone_at IS NULL AS tenancy_live,
       m.role AS tenancy_role
  FROM claimed c
  LEFT JOIN tenancy_org o ON o.id = c.org_id
  LEFT JOIN tenancy_membership m
    ON m.org_id = c.org_id AND m.user_id = c.created_by AND m.ended_at IS NULL
