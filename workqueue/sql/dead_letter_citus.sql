-- dead_letter_citus: dead_letter's Citus form (WORKQUEUE['CITUS']): fail the item for good (a dead letter), only for the holder of this claim token; the tenant named in the statement, so Citus routes it whole to the tenant's node. Its attempt (attempt_citus) and its audit entry (dead_letter_entry_citus) are sent next in the same transaction
-- claimed_by is kept: a dead letter names the worker of its last attempt.
UPDATE ONLY workqueue_workitem
   SET status = 'failed', claim_token = NULL, lease_expires_at = NULL,
       last_error = %(error)s::text, updated_at = now(),
       updated_by = {system_actor}
 WHERE org_id = %(org_id)s::uuid AND id = %(id)s::uuid
   AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
