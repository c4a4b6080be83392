-- stale_tenants: the tenants holding claimed items whose lease has passed, across tenants (the sweep then requeues each under its own tenant)
SELECT DISTINCT org_id
  FROM workqueue_workitem
 WHERE status = 'claimed' AND lease_expires_at < now()
 LIMIT %(limit)s
