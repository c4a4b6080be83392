-- claim_tenant_citus: the claim's Citus form (WORKQUEUE['CITUS']): up to limit due pending items of one tenant, lane and kinds (their ready rows taken), highest priority then oldest, neither paused, within the tenant's cap, one per concurrency key and none of a key already claimed, locked FOR UPDATE SKIP LOCKED; each gets a claim token, a lease, and one attempt spent, as claim_set writes them. Every table is filtered by the tenant, so Citus routes the whole statement to the node holding its shards
-- Citus refuses a volatile function in an UPDATE's SET, so the claim token is made from one random seed per call
-- (a parameter) and the item's id, immutably: distinct per item, unguessable without the seed.
-- The locked ids are an array (one InitPlan): a semi join would scan the locking subquery again for each row, and a
-- rescan skips the rows this statement has just updated and locks more, past the limit.
-- A paused lane or kind (workqueue_pause, a reference table: on every node) is not claimed, read here again so a pause
-- made since the tenants were read holds. The tenant's cap (its share's max_in_flight, else `default_cap`; none: NULL)
-- bounds the limit by what it runs in the lane now. Not here yet: the lanes' and kinds' caps, rate limits and the
-- fair order between tenants (the caller picks the tenant).
WITH claimed AS (
UPDATE workqueue_workitem AS w
   SET status = 'claimed',
       claimed_by = %(worker_id)s::text,
       claimed_at = now(),
       claim_token = md5(%(seed)s::text || w.id::text)::uuid,
       lease_expires_at = now() + make_interval(secs => %(lease_s)s::float8),
       attempts = w.attempts + 1,
       updated_at = now(),
       updated_by = {system_actor}
 WHERE w.org_id = %(org_id)s::uuid
   AND w.status = 'pending'
   AND w.id = ANY (ARRAY(SELECT x.id FROM workqueue_workitem x
                 WHERE x.org_id = %(org_id)s::uuid
                   AND x.status = 'pending'
                   AND x.id IN (SELECT DISTINCT ON (coalesce(r.concurrency_key, r.id::text)) r.id
                                  FROM workqueue_ready r
                                 WHERE r.org_id = %(org_id)s::uuid
                                   AND r.lane = %(lane)s::text
                                   AND r.kind = ANY (%(kinds)s::text[])
                                   AND r.available_at <= now()
                                   AND NOT EXISTS (SELECT FROM workqueue_pause p
                                                    WHERE p.lane = r.lane
                                                      AND p.kind IN ('', r.kind))
                                   AND NOT EXISTS (SELECT FROM workqueue_workitem k
                                                    WHERE k.org_id = %(org_id)s::uuid
                                                      AND k.concurrency_key = r.concurrency_key
                                                      AND k.status = 'claimed')
                                 ORDER BY coalesce(r.concurrency_key, r.id::text), r.priority DESC,
                                          r.available_at)
                 ORDER BY x.priority DESC, x.available_at, x.id
                 LIMIT LEAST(%(limit)s::integer, (SELECT GREATEST(c.cap - (
                                SELECT count(*) FROM workqueue_workitem h
                                 WHERE h.org_id = %(org_id)s::uuid AND h.lane = %(lane)s::text
                                   AND h.status = 'claimed'), 0)
                          FROM (SELECT COALESCE((SELECT s.max_in_flight FROM workqueue_tenantshare s
                                                  WHERE s.org_id = %(org_id)s::uuid),
                                                %(default_cap)s::integer) AS cap) AS c
                         WHERE c.cap IS NOT NULL))
                   FOR UPDATE SKIP LOCKED))
RETURNING w.*
), taken AS (
    DELETE FROM workqueue_ready r
     USING claimed c
     WHERE r.org_id = %(org_id)s::uuid AND r.id = c.id
)
SELECT contexts.*
  FROM ({claim_contexts}) AS contexts
 ORDER BY contexts.priority DESC, contexts.available_at, contexts.id
