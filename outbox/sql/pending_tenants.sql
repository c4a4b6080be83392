-- pending_tenants: up to limit tenants with pending outbox rows, read across tenants without a lock (on Citus each node answers for its shards); the relay's Citus form then takes each one's rows on its node
SELECT DISTINCT org_id
  FROM workqueue_outbox_outboxrow
 WHERE status = 'pending'
 LIMIT %(limit)s
