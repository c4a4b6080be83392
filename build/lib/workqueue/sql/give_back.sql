-- give_back: hand the item back without spending an attempt (defer, release), only for the holder of this claim token
UPDATE workqueue_workitem
   SET status = 'pending', available_at = now() + make_interval(secs => %(delay_s)s::float8),
       attempts = GREATEST(attempts - 1, 0),
       claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
       last_error = %(note)s::text, updated_at = now(),
       updated_by = {system_actor}
 WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
