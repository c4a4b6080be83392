-- claim_one: the woken claim: the first due item of the lane and kinds alone, highest priority then oldest across tenants (not of a paused lane or kind, one per concurrency key), locked with the compiled select_for_update(skip_locked=True) queryset of workqueue/claim_statements.py; it gets a fresh token, a lease, and one attempt spent; or, while a rate limit is set or (fair) a tenant's cap stands, nothing, and one row saying so; every row says whether a rate limit is set (rate_limited) and a tenant's cap stands (tenant_capped)
-- The worker was idle, so there is no backlog to share out and nothing to count: the claim that counts caps and spends
-- rate limits (claim_oldest_first) runs only when held says it must (two probes of nearly empty indexes, read in this
-- statement, so no reading of them goes before the claim and none is out of date). A pause is one index probe of
-- the candidate's lane and kind, and the update finds its one row by key (a scalar: the primary key, whatever the
-- plan guesses of the table).
-- Each row comes back with what its context needs (tenancy_live, tenancy_role: the claim_contexts part), so a claim
-- costs one round trip.
-- synchronous_commit: 'on' (the default) makes the attempt durable before any handler runs; 'off' trades that for speed.
WITH commit_mode AS MATERIALIZED (
    SELECT set_config('synchronous_commit', %(synchronous_commit)s::text, true) AS setting
), held AS MATERIALIZED (
    -- a rate limit set, a tenant capped (tenantshare_capped_idx), and whether either holds
    -- this claim back: a tenant's cap only while the claim is fair
    SELECT r.rate_limited, c.tenant_capped,
           r.rate_limited OR (%(fair)s::boolean AND c.tenant_capped) AS held
      FROM (SELECT EXISTS (SELECT FROM workqueue_ratelimit) AS rate_limited) AS r,
           (SELECT EXISTS (SELECT FROM workqueue_tenantshare
                            WHERE max_in_flight IS NOT NULL) AS tenant_capped) AS c
), claimed AS (
UPDATE workqueue_workitem AS w
   SET status = 'claimed',
       claimed_by = %(worker_id)s::text,
       claimed_at = now(),
       claim_token = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => %(lease_s)s::float8),
       attempts = w.attempts + 1,
       updated_at = now(),
       updated_by = {system_actor}
  FROM commit_mode
 WHERE NOT (SELECT held FROM held)
   AND w.id = ({locking})
RETURNING w.*
)
SELECT contexts.*, held.rate_limited, held.tenant_capped
  FROM held LEFT JOIN ({claim_contexts}) AS contexts ON true
 WHERE contexts.id IS NOT NULL OR held.held
