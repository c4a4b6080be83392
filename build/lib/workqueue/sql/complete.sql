-- complete: mark the item done, only for the holder of this claim token
UPDATE workqueue_workitem
   SET status = 'done', lease_expires_at = NULL, last_error = '', updated_at = now(),
       updated_by = {system_actor}
 WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
