-- take_pending_citus: take_pending's Citus form (WORKQUEUE['CITUS']): lock up to limit of one tenant's pending outbox rows, oldest first, skipping rows another relayer holds (held until the relay's transaction ends); the tenant named, so Citus routes it to its node (FOR UPDATE across nodes is refused)
SELECT id, org_id, kind, payload, actor, request_id, traceparent
  FROM workqueue_outbox_outboxrow
 WHERE org_id = %(org_id)s::uuid AND status = 'pending'
 ORDER BY created_at
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED
