-- claim_one: the woken claim: the first due item of the lane and kinds alone (its row of the ready ring, workqueue_ready, taken), highest priority then oldest across tenants (not of a paused lane or kind, one per concurrency key), locked with the compiled select_for_update(skip_locked=True) queryset of workqueue/claim_statements.py; it gets a fresh token, a lease, and one attempt spent; or, while a rate limit is set or (fair) a tenant's cap stands, nothing, and one row saying so; every row says whether a rate limit is set (rate_limited) and a tenant's cap stands (tenant_capped)
-- The worker was idle, so there is no backlog to share out and nothing to count: the claim that counts caps and spends
-- rate limits (claim_oldest_first) runs only when held says it must (the rate limits' small table and the capped tenants' index, read in this
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
    SELECT f.rate_limited, f.tenant_capped,
           f.rate_limited OR (%(fair)s::boolean AND f.tenant_capped) AS held
      FROM (SELECT ({rate_limits_in_effect}
                   ) AS rate_limited,
                   ({caps_in_effect}
                   ) AS tenant_capped
            OFFSET 0) AS f  -- each read once (not pulled up into both uses)
), picked AS MATERIALIZED (
    SELECT c.* FROM ({locking}) AS c WHERE NOT (SELECT held FROM held)
), claimed AS (
UPDATE ONLY workqueue_workitem AS w
   SET status = 'claimed',
       {claim_set}
  FROM commit_mode
 WHERE w.id = (SELECT x.id FROM ONLY workqueue_workitem x
                WHERE x.id = (SELECT id FROM picked) AND x.status = 'pending'
                  FOR UPDATE SKIP LOCKED)
RETURNING w.*
), taken AS (
    DELETE FROM workqueue_ready r
     USING picked p, claimed c
     WHERE c.id = p.id AND r.slot = p.slot AND r.lane = %(lane)s::text AND r.org_id = p.org_id
       AND r.priority = p.priority AND r.available_at = p.available_at AND r.id = p.id
)
SELECT contexts.*, held.rate_limited, held.tenant_capped
  FROM held LEFT JOIN ({claim_contexts}) AS contexts ON true
 WHERE contexts.id IS NOT NULL OR held.held
