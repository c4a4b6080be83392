-- set_rate_limit: set (or change) the rate limit of a scope and target: at most count items per period_s claimed, burst at once; a changed limit starts its buckets afresh (full); appends a queue.rate_limit_set audit entry under the site's own tenant id; wakes every lane's workers (work_available '*', delivered at commit), so what the limit allows now is claimed at once, not at the workers' next poll
WITH upserted AS (
    INSERT INTO workqueue_ratelimit (scope, target, count, period_s, burst, set_by, updated_at)
    VALUES (%(scope)s::text, %(target)s::text, %(n)s::integer, %(period_s)s::integer,
            %(burst)s::integer, %(actor)s::text, now())
        ON CONFLICT (scope, target) DO UPDATE
       SET count = EXCLUDED.count, period_s = EXCLUDED.period_s, burst = EXCLUDED.burst,
           set_by = EXCLUDED.set_by, updated_at = now()
    RETURNING id, scope, target, count, period_s, burst, set_by, updated_at
), reset AS (
    DELETE FROM workqueue_ratebucket b WHERE b.limit_id = (SELECT id FROM upserted)
), entries AS (
    SELECT %(site_org_id)s::uuid AS org_id, 'queue.rate_limit_set' AS action,
           'workqueue.ratelimit' AS subject_type, u.scope || ':' || u.target AS subject_id,
           jsonb_build_object('scope', u.scope, 'target', u.target, 'count', u.count,
                              'period_s', u.period_s, 'burst', u.burst) AS data
      FROM upserted u
), audited AS (
{append_entries}
), announced AS (
    SELECT pg_notify('work_available', '*') FROM upserted
)
SELECT id, scope, target, count, period_s, burst, set_by, updated_at FROM upserted
 CROSS JOIN (SELECT count(*) AS notices FROM announced) AS a
