-- claim_rate_blocked: the buckets with no allowance now (GCRA: a bucket allows one more while its tat is at most now() + (burst - 1) * interval) and their limits' scopes, read once per claim in its snapshot (the claim with rate limits, after its controls; the locking subqueries pass over every item a blocked bucket counts)
-- Only a bucket spent ahead of now (tat > now(), its index) can be blocked; each finds its limit by its key, so the
-- limits that count none of those buckets are never read.
rate_blocked AS MATERIALIZED (
    SELECT l.scope, b.key
      FROM workqueue_ratebucket b
     CROSS JOIN LATERAL (SELECT r.scope, r.target, r.burst, r.period_s::float8 / r.count AS interval_s
                           FROM workqueue_ratelimit r
                          WHERE r.id = b.limit_id
                          LIMIT 1) AS l
     WHERE b.tat > now()
       AND b.tat > now() + make_interval(secs => (l.burst - 1) * l.interval_s)
       AND (l.target = '*' OR l.target = b.key)
