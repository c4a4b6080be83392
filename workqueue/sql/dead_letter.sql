-- dead_letter: fail the item for good (a dead letter, or an orphan whose tenant is gone), only for the holder of this claim token
UPDATE workqueue_workitem
   SET status = 'failed', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
       last_error = %(error)s, updated_at = now(),
       updated_by = '00000000-0000-0000-0000-000000000000'
 WHERE id = %(id)s AND claim_token = %(claim_token)s AND status = 'claimed'
RETURNING *
