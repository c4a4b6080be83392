-- dead_letter: fail the item for good (a dead letter), only for the holder of this claim token, and append the audit entry naming it in the same statement
WITH failed AS (
    UPDATE workqueue_workitem
       SET status = 'failed', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
           last_error = %(error)s::text, updated_at = now(),
           updated_by = '00000000-0000-0000-0000-000000000000'
     WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
    RETURNING *
), audited AS (
    INSERT INTO audit_auditentry
           (id, org_id, actor_id, action, subject_type, subject_id, data, request_id, created_at)
    SELECT gen_random_uuid(), f.org_id, %(actor_id)s::uuid, 'work.dead_lettered',
           'workqueue.workitem', f.id::text,
           jsonb_build_object('kind', f.kind, 'attempts', f.attempts,
                              'permanent', %(permanent)s::boolean,
                              'error', left(%(error)s::text, 2000)),
           %(request_id)s::uuid, now()
      FROM failed f
)
SELECT * FROM failed
