-- erase_rate_limits: delete the tenant's own rate limits with their buckets, and its bucket of every tenant limit with target * (the tenant's id is their key); a tenant has a handful at most, so one statement; returns how many rows
WITH buckets_gone AS (
    DELETE FROM workqueue_ratebucket AS b USING workqueue_ratelimit AS l
     WHERE l.id = b.limit_id AND l.scope = 'tenant'
       AND (b.key = %(org_id)s::uuid::text OR l.target = %(org_id)s::uuid::text)
    RETURNING 1
), limits_gone AS (
    DELETE FROM workqueue_ratelimit WHERE scope = 'tenant' AND target = %(org_id)s::uuid::text
    RETURNING 1
)
SELECT (SELECT count(*) FROM buckets_gone) + (SELECT count(*) FROM limits_gone)
