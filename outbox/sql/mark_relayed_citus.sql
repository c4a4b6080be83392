-- mark_relayed_citus: mark_relayed's Citus form: one tenant's rows the relay handled, relayed or failed with the reason it could not relay them; the tenant named, so Citus routes it to its node
UPDATE workqueue_outbox_outboxrow AS o
   SET status = CASE WHEN t.error IS NULL THEN 'relayed' ELSE 'failed' END,
       last_error = COALESCE(t.error, ''),
       relayed_at = now()
  FROM unnest(%(ids)s::uuid[], %(errors)s::text[]) AS t(id, error)
 WHERE o.org_id = %(org_id)s::uuid AND o.id = t.id AND o.status = 'pending'
