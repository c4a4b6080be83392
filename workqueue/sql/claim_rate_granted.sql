-- claim_rate_granted: of the picked items, those every rate limit they fall under allows now, in claim order, each spent from its bucket (the function workqueue_rate_grant_v2, sql/schema/rate_grant_v2.sql); an item refused is left pending, no attempt spent; and rate_next: when the soonest bucket that held items back allows one more
-- The picked items go to the function as they were locked (their kind, tenant and rate key carried from the pick, not
-- read again), and only when a limit may count one of them (rate_counted); a claim none of whose items a limit counts
-- grants them all and starts no spending: PostgreSQL starts every node of a plan each time it runs it, and the
-- spending's, inline, cost each such claim of 100 about half a millisecond of the server's time.
rate_items AS MATERIALIZED (
    -- what the function finds the picked items' limits by, in claim order beside picked's ids
    -- (read only when it is called)
    SELECT array_agg(p.kind ORDER BY p.n) AS kinds, array_agg(p.org_id ORDER BY p.n) AS org_ids,
           array_agg(p.rate_key ORDER BY p.n) AS rate_keys
      FROM pick p
), rate_counted AS MATERIALIZED (
    -- whether a limit may count a picked item: one naming their lane, a kind, a tenant or a key
    -- of theirs, or '*' in any scope (probes of the limits' unique index, each one row at most:
    -- LIMIT keeps them probes whatever the planner guesses of the table; the first found ends it)
    SELECT EXISTS (
        SELECT FROM (SELECT s.scope, '*' AS target
                       FROM (VALUES ('kind'), ('lane'), ('tenant'), ('key')) AS s(scope)
                      UNION ALL
                     SELECT 'lane', %(lane)s::text
                      UNION ALL
                     SELECT 'kind', k.kind FROM (SELECT DISTINCT kind FROM pick) AS k
                      UNION ALL
                     SELECT 'tenant', t.org_id::text FROM (SELECT DISTINCT org_id FROM pick) AS t
                      UNION ALL
                     SELECT 'key', p.rate_key FROM pick p WHERE p.rate_key IS NOT NULL) AS c
         CROSS JOIN LATERAL (SELECT FROM workqueue_ratelimit r
                              WHERE r.scope = c.scope AND r.target = c.target
                              LIMIT 1) AS l) AS counted
), rate_granted AS MATERIALIZED (
    SELECT p.ids, NULL::timestamptz AS next_free_at
      FROM picked p
     WHERE NOT (SELECT counted FROM rate_counted)
     UNION ALL
    SELECT g.granted_ids, g.next_free_at
      FROM picked p
     CROSS JOIN rate_items i
     CROSS JOIN LATERAL workqueue_rate_grant_v2(p.ids, i.kinds, i.org_ids, i.rate_keys,
                                                %(lane)s::text) AS g
     WHERE (SELECT counted FROM rate_counted)
), granted AS (
    SELECT ids FROM rate_granted
), rate_next AS (
    -- when the claim came back short: in how many seconds the soonest bucket that held items
    -- back allows one more (one that allowed nothing when the claim began, of its lane, its
    -- kinds, any tenant or key; or one it trimmed, spent to its allowance), so a worker can
    -- claim again then; NULL when none did
    SELECT CASE WHEN COALESCE(cardinality((SELECT ids FROM granted)), 0) < %(limit)s::integer
                THEN extract(epoch FROM LEAST(
                    (SELECT min(b.free_at) FROM rate_blocked b
                      WHERE CASE b.scope WHEN 'kind' THEN b.key = ANY(%(kinds)s::text[])
                                         WHEN 'lane' THEN b.key = %(lane)s::text
                                         ELSE true END),
                    (SELECT next_free_at FROM rate_granted)) - now())::float8
           END AS rate_wait_s
