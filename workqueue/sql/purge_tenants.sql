-- purge_tenants: up to limit tenants holding items of the given statuses last changed before `before`, read across tenants without a lock (on Citus each node answers for its shards); purge_items_citus then deletes each one's on its node
SELECT DISTINCT org_id
  FROM workqueue_workitem
 WHERE status = ANY (%(statuses)s::text[]) AND updated_at < %(before)s::timestamptz
 LIMIT %(limit)s
