-- requeue_citus: requeue_stale's Citus form (WORKQUEUE['CITUS']): hand back the tenant's claimed items the locking picks (those whose lease passed before `before`, or the rescue's: those the named gone holders claimed before it), each requeued, dead-lettered once its attempts are spent, or cancelled when someone asked, as requeue_stale writes them; every table filtered by the tenant, so Citus routes it whole to the tenant's node. Returns each row with its holder as it was (`held_by`); the attempts, ready rows and audit entries follow in the same transaction (settle_citus.py)
-- The SET is requeue_stale's, written again: the same outcomes are tested for each (tests/contract/test_maintenance.py,
-- tests/citus/test_settle_on_citus.py).
-- No announcement on work_available: a notify from a shard never reaches the coordinator's listeners; the workers' poll finds the items.
WITH stale AS (
    {locking}
), moved AS (
UPDATE ONLY workqueue_workitem AS w
   SET status = CASE WHEN w.cancel_requested_at IS NOT NULL THEN 'cancelled'
                     WHEN w.attempts >= w.max_attempts THEN 'failed' ELSE 'pending' END,
       available_at = now(),
       claimed_by = CASE WHEN w.cancel_requested_at IS NULL AND w.attempts >= w.max_attempts
                         THEN w.claimed_by END,
       claim_token = NULL, lease_expires_at = NULL,
       last_error = CASE WHEN w.cancel_requested_at IS NOT NULL
                         THEN {cause} || '; cancelled as asked'
                         WHEN w.attempts >= w.max_attempts
                         THEN {cause} || '; attempts spent' ELSE {cause} END,
       updated_at = now(), ringed_at = now(),
       updated_by = {system_actor}
  FROM stale
 WHERE w.org_id = %(org_id)s::uuid AND w.id = stale.id
RETURNING w.*
)
SELECT m.*, s.claimed_by AS held_by FROM moved m JOIN stale s ON s.id = m.id
