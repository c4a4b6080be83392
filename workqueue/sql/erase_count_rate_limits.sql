-- erase_count_rate_limits: the tenant's own rate limits (scope tenant, target its id) and the buckets of tenant limits that count it
SELECT (SELECT count(*) FROM workqueue_ratelimit
         WHERE scope = 'tenant' AND target = %(org_id)s::uuid::text)
     + (SELECT count(*) FROM workqueue_ratebucket b JOIN workqueue_ratelimit l ON l.id = b.limit_id
         WHERE l.scope = 'tenant' AND b.key = %(org_id)s::uuid::text)
