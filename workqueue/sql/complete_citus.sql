-- complete_citus: complete's Citus form (WORKQUEUE['CITUS']): mark the item done with its result (JSON text, or NULL), only for the holder of this claim token; the tenant is named in the statement, so Citus routes it whole to the tenant's node. Its attempt is attempt_citus, sent next in the same transaction
-- Citus inserts the rows one CTE returned into another table by COPY, which row-level security refuses: so no
-- record_attempts here. Nor move_dependents (its function reads other tables from the shard): workflows do not run on Citus yet.
UPDATE ONLY workqueue_workitem
   SET status = 'done', lease_expires_at = NULL, last_error = '', updated_at = now(),
       updated_by = {system_actor}, result = %(result)s::jsonb
 WHERE org_id = %(org_id)s::uuid AND id = %(id)s::uuid
   AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
RETURNING *
