-- give_back: hand the item back without spending an attempt (defer, release, snooze; with its ready row), only for the holder of this claim token (one someone asked to cancel meanwhile ends cancelled instead: it never runs again, and the edges it ends are met: those a waiting item needs finished)
WITH given AS (
UPDATE ONLY workqueue_workitem
   SET status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
       available_at = now() + make_interval(secs => %(delay_s)s::float8),
       attempts = GREATEST(attempts - 1, 0),
       claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
       last_error = %(note)s::text, updated_at = now(), ringed_at = now(),
       updated_by = {system_actor}
 WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
), made_pending AS (
    SELECT * FROM given
), {ready_rows}, parent_items AS (
    SELECT g.id, g.has_dependents FROM given g WHERE g.status = 'cancelled'
), {move_dependents}
SELECT g.* FROM given g, (SELECT count(*) FROM dependents) AS r
