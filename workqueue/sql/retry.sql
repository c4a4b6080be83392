-- retry: hand the item back for another attempt after a delay (with its ready row), only for the holder of this claim token (one someone asked to cancel meanwhile ends cancelled instead: it never runs again, and the edges it ends are met: those a waiting item needs finished), and record the failed attempt (its worker, error and traceback) in the same statement
-- `held` reads the row as it was before this statement (its holder, which the update clears).
WITH held AS (
    SELECT id, claimed_by FROM ONLY workqueue_workitem
     WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
), retried AS (
UPDATE ONLY workqueue_workitem
   SET status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
       available_at = now() + make_interval(secs => %(delay_s)s::float8),
       claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
       last_error = %(error)s::text, updated_at = now(), ringed_at = now(),
       updated_by = {system_actor}
 WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
), ended AS (
    SELECT r.org_id, r.id, r.attempts, h.claimed_by, r.claimed_at,
           'retried' AS outcome, %(error)s::text AS error, %(traceback)s::text AS traceback
      FROM retried r JOIN held h ON h.id = r.id
), attempts AS (
{record_attempts}
), made_pending AS (
    SELECT * FROM retried
), {ready_rows}, parent_items AS (
    SELECT r.id, r.has_dependents FROM retried r WHERE r.status = 'cancelled'
), {move_dependents}
SELECT r.* FROM retried r, (SELECT count(*) FROM dependents) AS rel
