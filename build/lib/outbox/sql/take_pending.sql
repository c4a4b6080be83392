-- take_pending: lock up to limit pending outbox rows across tenants, oldest first, skipping rows another relayer holds (held until the relay's transaction ends)
SELECT id, org_id, kind, payload, actor, request_id, traceparent
  FROM workqueue_outbox_outboxrow
 WHERE status = 'pending'
 ORDER BY created_at
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED
