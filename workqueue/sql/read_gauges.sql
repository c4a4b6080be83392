-- read_gauges: counts by lane, kind and status across tenants, with the oldest due pending item's age in seconds per group; a lane not among the declared ones is counted under one label, so the rows stay bounded whatever lanes callers made up
-- The hot table only (ONLY): done items in history (workqueue/history.py) are counted by read_history, from the statistics,
-- never by a scan of the week the retention keeps.
SELECT CASE WHEN lane = ANY(%(lanes)s::text[]) THEN lane ELSE '(undeclared)' END AS lane,
       kind, status, count(*) AS items,
       EXTRACT(EPOCH FROM now() - min(available_at) FILTER (WHERE status = 'pending' AND available_at <= now()))::float8 AS oldest_age_s
  FROM ONLY workqueue_workitem
 GROUP BY 1, kind, status
