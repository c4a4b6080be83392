-- read_rate_limits: every rate limit, by scope then target, with how much of its burst its busiest bucket has spent now (GCRA: ceil((tat - now()) / interval), at most burst) and how many of its buckets allow nothing now (the gauges page, manage.py queue limit list)
SELECT l.id, l.scope, l.target, l.count, l.period_s, l.burst, l.set_by, l.updated_at,
       COALESCE(b.used, 0) AS used, COALESCE(b.blocked, 0) AS blocked
  FROM workqueue_ratelimit l
  LEFT JOIN LATERAL (
       -- COALESCE inside: LEAST skips a NULL, so with no bucket it gave the whole burst.
       SELECT LEAST(COALESCE(max(ceil(extract(epoch FROM s.tat - now()) * l.count
                                      / l.period_s)), 0),
                    l.burst)::integer AS used,
              count(*) FILTER (WHERE s.tat > now() + make_interval(
                  secs => (l.burst - 1) * l.period_s::float8 / l.count)) AS blocked
         FROM workqueue_ratebucket s
        WHERE s.limit_id = l.id AND s.tat > now()) AS b ON true
 ORDER BY l.scope, l.target
