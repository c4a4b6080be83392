-- due_tenants_citus: up to limit tenants with due ready rows in a lane and kinds, neither paused (workqueue_pause, a reference table: a copy on every node), in a random order (no tenant always first), read on the coordinator without a lock (each node answers for its shards); the Citus claim then claims within each, on its node
SELECT t.org_id
  FROM (SELECT DISTINCT r.org_id
          FROM workqueue_ready r
         WHERE r.lane = %(lane)s::text
           AND r.kind = ANY (%(kinds)s::text[])
           AND r.available_at <= now()
           AND NOT EXISTS (SELECT FROM workqueue_pause p
                            WHERE p.lane = r.lane AND p.kind IN ('', r.kind))) AS t
 ORDER BY random()
 LIMIT %(limit)s
