-- extend_lease: push the lease out from now, only for the holder of this claim token
UPDATE ONLY workqueue_workitem
   SET lease_expires_at = now() + make_interval(secs => %(lease_s)s::float8), updated_at = now(),
       updated_by = {system_actor}
 WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
