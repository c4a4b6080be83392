-- requeue_stale: hand back the tenant's claimed items whose lease passed before `before` (the locking subquery is the queryset workqueue/maintenance.py compiles); one whose attempts are spent becomes a dead letter instead, with its audit entry in the same statement
-- (attempts >= max_attempts spells rules.is_exhausted once more; tests/contract/test_maintenance.py holds them together)
WITH stale AS (
    {locking}
), moved AS (
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
), audited AS (
    INSERT INTO audit_auditentry
           (id, org_id, actor_id, action, subject_type, subject_id, data, request_id, created_at)
    SELECT gen_random_uuid(), m.org_id, %(actor_id)s::uuid, 'work.dead_lettered',
           'workqueue.workitem', m.id::text,
           jsonb_build_object('kind', m.kind, 'attempts', m.attempts, 'permanent', false,
                              'error', m.last_error),
           %(request_id)s::uuid, now()
      FROM moved m
     WHERE m.status = 'failed'
)
SELECT * FROM moved
