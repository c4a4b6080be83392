-- claim_rate_blocked: the rate limits in effect and the buckets with no allowance now (GCRA: a bucket allows one more while its tat is at most now() + (burst - 1) * interval), read once per claim in its snapshot (the claim with rate limits, after its controls; the locking subqueries pass over every item a blocked bucket counts)
rate_limits AS MATERIALIZED (
    SELECT l.id, l.scope, l.target, l.burst, l.period_s::float8 / l.count AS interval_s
      FROM workqueue_ratelimit l
), rate_blocked AS MATERIALIZED (
    SELECT l.scope, b.key
      FROM workqueue_ratebucket b
      JOIN rate_limits l ON l.id = b.limit_id
     WHERE b.tat > now()
       AND b.tat > now() + make_interval(secs => (l.burst - 1) * l.interval_s)
       AND (l.target = '*' OR l.target = b.key)
