-- read_gauges: counts by lane, kind and status across tenants, with the oldest due pending item's age in seconds per group
SELECT lane, kind, status, count(*) AS items,
       EXTRACT(EPOCH FROM now() - min(available_at) FILTER (WHERE status = 'pending' AND available_at <= now()))::float8 AS oldest_age_s
  FROM workqueue_workitem
 GROUP BY lane, kind, status
