-- clear_rate_limit: remove the rate limit of a scope and target, and its buckets; appends a queue.rate_limit_cleared audit entry under the site's own tenant id; a limit not set changes nothing and returns no row; wakes every lane's workers (work_available '*', delivered at commit), so the items it held back are claimed at once, not at the workers' next poll
WITH deleted AS (
    DELETE FROM workqueue_ratelimit
     WHERE scope = %(scope)s::text AND target = %(target)s::text
    RETURNING id, scope, target, count, period_s, burst, set_by, updated_at
), buckets AS (
    DELETE FROM workqueue_ratebucket b WHERE b.limit_id IN (SELECT id FROM deleted)
), entries AS (
    SELECT %(site_org_id)s::uuid AS org_id, 'queue.rate_limit_cleared' AS action,
           'workqueue.ratelimit' AS subject_type, d.scope || ':' || d.target AS subject_id,
           jsonb_build_object('scope', d.scope, 'target', d.target, 'count', d.count,
                              'period_s', d.period_s, 'burst', d.burst) AS data
      FROM deleted d
), audited AS (
{append_entries}
), announced AS (
    SELECT pg_notify('work_available', '*') FROM deleted
)
SELECT id, scope, target, count, period_s, burst, set_by, updated_at FROM deleted
 CROSS JOIN (SELECT count(*) AS notices FROM announced) AS a
