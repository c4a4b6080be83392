-- requeue_stale: hand back the tenant's claimed items whose lease passed before `before`; one whose attempts are spent becomes a dead letter instead
-- (attempts >= max_attempts spells rules.is_exhausted once more; tests/contract/test_maintenance.py holds them together)
WITH stale AS (
    SELECT id
      FROM workqueue_workitem
     WHERE status = 'claimed'
       AND lease_expires_at < COALESCE(%(before)s::timestamptz, now())
     ORDER BY lease_expires_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE workqueue_workitem AS w
   SET status = CASE WHEN w.attempts >= w.max_attempts THEN 'failed' ELSE 'pending' END,
       available_at = now(),
       claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
       last_error = CASE WHEN w.attempts >= w.max_attempts
                         THEN 'lease expired; attempts spent' ELSE 'lease expired' END,
       updated_at = now(),
       updated_by = '00000000-0000-0000-0000-000000000000'
  FROM stale
 WHERE w.id = stale.id
RETURNING w.*
