-- purge_rate_buckets: delete up to batch rate-limit buckets idle for a whole burst (tat before now() - burst * interval: full again, the same as none; the claim makes a missing bucket full) or of a limit no longer set; returns how many
-- Read through the index on free_at (an idle bucket allows one more now). A bucket a claim holds is skipped, and one
-- a claim spent from since this statement's snapshot is read afresh by FOR UPDATE and kept (its tat is recent again).
WITH doomed AS (
    SELECT b.limit_id, b.key
      FROM workqueue_ratebucket b
      LEFT JOIN workqueue_ratelimit l ON l.id = b.limit_id
     WHERE b.free_at < now()
       AND (l.id IS NULL
            OR b.tat < now() - make_interval(secs => l.burst * l.period_s::float8 / l.count))
     LIMIT %(batch)s
       FOR UPDATE OF b SKIP LOCKED
), gone AS (
    DELETE FROM workqueue_ratebucket AS b
     USING doomed
     WHERE b.limit_id = doomed.limit_id AND b.key = doomed.key
    RETURNING 1
)
SELECT count(*) FROM gone
