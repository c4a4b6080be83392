-- retry_citus: retry's Citus form (WORKQUEUE['CITUS']): hand the item back for another attempt after a delay, only for the holder of this claim token (one someone asked to cancel meanwhile ends cancelled instead); the tenant named in the statement, so Citus routes it whole to the tenant's node. Its attempt (attempt_citus) and its ready row (ready_row_citus) are sent next in the same transaction
UPDATE ONLY workqueue_workitem
   SET status = CASE WHEN cancel_requested_at IS NULL THEN 'pending' ELSE 'cancelled' END,
       available_at = now() + make_interval(secs => %(delay_s)s::float8),
       claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
       last_error = %(error)s::text, updated_at = now(), ringed_at = now(),
       updated_by = {system_actor}
 WHERE org_id = %(org_id)s::uuid AND id = %(id)s::uuid
   AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
