-- fail_orphaned: fail for good an item whose tenant is gone, only for the holder of this claim token (no audit entry: no tenant is left to hold one), meeting the edges it ends (those a waiting item needs finished) in the same statement
WITH failed AS (
UPDATE workqueue_workitem
   SET status = 'failed', claim_token = NULL, lease_expires_at = NULL,
       last_error = %(error)s::text, updated_at = now(),
       updated_by = {system_actor}
 WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
), parent_items AS (
    SELECT f.id, f.has_dependents FROM failed f
), {move_dependents}
SELECT f.* FROM failed f, (SELECT count(*) FROM dependents) AS r
