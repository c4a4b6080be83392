-- claim_rate_blocked: the buckets with no allowance now (free_at > now(): GCRA's tat past now() + (burst - 1) * interval), their limits' scopes and when each allows one more, read once per claim in its snapshot (the claim with rate limits, after its controls; the locking subqueries pass over every item a blocked bucket counts)
-- Read through the index on free_at, so only the blocked buckets are read (none while no limit binds); each finds
-- its limit by its key.
rate_blocked AS MATERIALIZED (
    SELECT l.scope, b.key, b.free_at
      FROM workqueue_ratebucket b
     CROSS JOIN LATERAL (SELECT r.scope, r.target
                           FROM workqueue_ratelimit r
                          WHERE r.id = b.limit_id
                          LIMIT 1) AS l
     WHERE b.free_at > now()
       AND (l.target = '*' OR l.target = b.key)
