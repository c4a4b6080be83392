-- complete: mark the item done with its result (JSON text, or NULL), only for the holder of this claim token, and record its attempt and meet its edges (the items waiting for it) in the same statement
WITH done AS (
UPDATE ONLY workqueue_workitem
   SET status = 'done', lease_expires_at = NULL, last_error = '', updated_at = now(),
       updated_by = {system_actor}, result = %(result)s::jsonb
 WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
), ended AS (
    SELECT d.org_id, d.id, d.attempts, d.claimed_by, d.claimed_at,
           'done' AS outcome, '' AS error, '' AS traceback
      FROM done d
), attempts AS (
{record_attempts}
), parent_items AS (
    SELECT d.id, d.has_dependents FROM done d
), {move_dependents}
SELECT d.* FROM done d, (SELECT count(*) FROM dependents) AS r
