-- read_gauges: counts by lane, kind and status across tenants, with the oldest due pending item's age in seconds per group
SELECT lane, kind, status, count(*),
       EXTRACT(EPOCH FROM now() - min(available_at) FILTER (WHERE status = 'pending' AND available_at <= now()))
  FROM workqueue_workitem
 GROUP BY lane, kind, status
