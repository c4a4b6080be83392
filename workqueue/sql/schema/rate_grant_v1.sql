-- rate_grant_v1: of the items a claim picked (in claim order, with what their limits are found by), those every rate limit they fall under allows now; spends them from each bucket (GCRA: tat = greatest(tat, now()) + kept * interval, interval = period_s / count), the buckets locked FOR UPDATE in key order after the items (a claimer waits for another's commit and reads its fresh tat); an item refused is left pending, no attempt spent; returns the items granted, in claim order, and when the soonest bucket it trimmed allows one more (NULL when it trimmed none)
-- A function, called by the claim only when a limit may hold one of its picked items (sql/claim_rate_granted.sql), for
-- one reason: its statement is started only when it runs. The claim is one prepared statement, and PostgreSQL starts
-- every node of a plan each time it runs it: this spending, inline, cost every claim of 100 about half a millisecond of
-- the server's time, even one whose items no limit counts.
-- PL/pgSQL with its generic plan: planned once per session, not at every call; every lookup is by key.
-- VOLATILE: its statement reads a snapshot taken when it runs, after the claim has locked its items.
-- A bucket seen for the first time is made full (its burst); if another claimer made it first (after this
-- statement's snapshot), this claim takes none of its items this time.
-- Limits and buckets are found by their keys (a limit by its scope and target, the items' own or '*', through its
-- unique index; a bucket by its primary key), and each bucket carries its items in claim order, so the cost grows
-- with the items picked, not with the limits or buckets set.
-- SECURITY INVOKER (the default): it reads and writes as its caller, the claim's system login.
CREATE FUNCTION workqueue_rate_grant_v1(
    picked_ids uuid[], picked_kinds text[], picked_org_ids uuid[], picked_rate_keys text[], picked_lane text,
    OUT granted_ids uuid[], OUT next_free_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
    WITH rate_scopes AS MATERIALIZED (
        -- each scope with a limit: whether any names a target, and its '*' limit if set (index
        -- probes, each one row at most: LIMIT keeps them probes whatever the planner guesses of
        -- the table), so a scope without limits costs the items nothing
        SELECT * FROM (
            SELECT s.scope,
                   (SELECT r.target FROM workqueue_ratelimit r
                     WHERE r.scope = s.scope AND r.target <> '*'
                     ORDER BY r.target LIMIT 1) IS NOT NULL AS targeted,
                   e.id, e.burst, e.interval_s
              FROM (VALUES ('kind'), ('lane'), ('tenant'), ('key')) AS s(scope)
              LEFT JOIN LATERAL (SELECT r.id, r.burst, r.period_s::float8 / r.count AS interval_s
                                   FROM workqueue_ratelimit r
                                  WHERE r.scope = s.scope AND r.target = '*'
                                  LIMIT 1) AS e ON true) AS s
         WHERE s.targeted OR s.id IS NOT NULL
    ), rate_items AS MATERIALIZED (
        -- the picked items, with their place in claim order
        SELECT u.n, u.id, u.kind, picked_lane AS lane, u.org_id, u.rate_key
          FROM unnest(picked_ids, picked_kinds, picked_org_ids, picked_rate_keys)
               WITH ORDINALITY AS u(id, kind, org_id, rate_key, n)
    ), rate_keys AS MATERIALIZED (
        -- each key the items have in a scope with a limit, with its items in claim order (a
        -- scope without limits is not read: its branch's one-time condition is false)
        SELECT 'kind' AS scope, i.kind AS key, array_agg(i.id ORDER BY i.n) AS ids
          FROM rate_items i
         WHERE EXISTS (SELECT FROM rate_scopes WHERE scope = 'kind')
         GROUP BY i.kind
         UNION ALL
        SELECT 'lane', i.lane, array_agg(i.id ORDER BY i.n)
          FROM rate_items i
         WHERE EXISTS (SELECT FROM rate_scopes WHERE scope = 'lane')
         GROUP BY i.lane
         UNION ALL
        SELECT 'tenant', i.org_id::text, array_agg(i.id ORDER BY i.n)
          FROM rate_items i
         WHERE EXISTS (SELECT FROM rate_scopes WHERE scope = 'tenant')
         GROUP BY i.org_id
         UNION ALL
        SELECT 'key', i.rate_key, array_agg(i.id ORDER BY i.n)
          FROM rate_items i
         WHERE i.rate_key IS NOT NULL AND EXISTS (SELECT FROM rate_scopes WHERE scope = 'key')
         GROUP BY i.rate_key
    ), rate_buckets AS MATERIALIZED (
        -- each bucket the items fall in: their scope's '*' limit, and the limit whose target is
        -- their key (one probe of the limits' unique index on scope and target, in a scope that
        -- names targets)
        SELECT s.id AS limit_id, k.key, s.burst, s.interval_s, k.ids
          FROM rate_keys k
          JOIN rate_scopes s ON s.scope = k.scope
         WHERE s.id IS NOT NULL
         UNION ALL
        SELECT l.id, k.key, l.burst, l.period_s::float8 / l.count, k.ids
          FROM rate_keys k
          JOIN rate_scopes s ON s.scope = k.scope
         CROSS JOIN LATERAL (SELECT r.id, r.burst, r.period_s, r.count
                               FROM workqueue_ratelimit r
                              WHERE r.scope = k.scope AND r.target = k.key
                              LIMIT 1) AS l
         WHERE s.targeted AND k.key <> '*'
    ), rate_room AS MATERIALIZED (
        -- each bucket's allowance now: floor((now() + burst * interval - greatest(tat, now())) / interval),
        -- its row (when it has one) locked in key order
        SELECT b.limit_id, b.key, b.burst, b.interval_s, b.ids, h.tat IS NULL AS new,
               GREATEST(h.tat, now()) AS start,
               GREATEST(floor(b.burst - extract(epoch FROM GREATEST(h.tat, now()) - now()) / b.interval_s),
                        0)::integer AS room
          FROM (SELECT * FROM rate_buckets ORDER BY limit_id, key) AS b
          LEFT JOIN LATERAL (SELECT t.tat
                               FROM workqueue_ratebucket t
                              WHERE t.limit_id = b.limit_id AND t.key = b.key
                                FOR UPDATE) AS h ON true
    ), rate_trimmed AS MATERIALIZED (
        -- the items past a bucket's allowance
        SELECT unnest(r.ids[r.room + 1:]) AS id FROM rate_room r WHERE r.room < cardinality(r.ids)
    ), rate_made AS (
        -- free_at: when the bucket allows one more, tat - (burst - 1) * interval
        INSERT INTO workqueue_ratebucket (limit_id, key, tat, free_at)
        SELECT r.limit_id, r.key, now() + make_interval(secs => s.items * r.interval_s),
               now() + make_interval(secs => (s.items - r.burst + 1) * r.interval_s)
          FROM rate_room r
         CROSS JOIN LATERAL (SELECT count(*) AS items FROM unnest(r.ids) AS u(id)
                              WHERE u.id NOT IN (SELECT id FROM rate_trimmed)) AS s
         WHERE r.new AND s.items > 0
         ORDER BY r.limit_id, r.key
            ON CONFLICT (limit_id, key) DO NOTHING
        RETURNING limit_id, key
    ), rate_refused AS MATERIALIZED (
        -- trimmed, or under a new bucket another claimer made first
        SELECT id FROM rate_trimmed
         UNION
        SELECT unnest(r.ids) FROM rate_room r
         WHERE r.new AND (r.limit_id, r.key) NOT IN (SELECT limit_id, key FROM rate_made)
    ), rate_spend AS MATERIALIZED (
        -- what each bucket that has a row spends (its items, but those refused), and when it
        -- allows one more after that
        SELECT r.limit_id, r.key, r.start, r.interval_s, s.items,
               r.start + make_interval(secs => (s.items - r.burst + 1) * r.interval_s) AS free_at
          FROM rate_room r
         CROSS JOIN LATERAL (
               SELECT CASE WHEN NOT EXISTS (SELECT FROM rate_refused) THEN cardinality(r.ids)
                           ELSE (SELECT count(*) FROM unnest(r.ids) AS u(id)
                                  WHERE u.id NOT IN (SELECT id FROM rate_refused)) END AS items) AS s
         WHERE NOT r.new
    ), rate_spent AS (
        -- free_at is written only when the bucket allows nothing now; one that still allows some
        -- keeps its free_at, already past (only a bucket that allowed an item now is spent from,
        -- and its free_at never runs ahead of tat), so the claim reads it the same, and the update
        -- changes no indexed column: a HOT update, no index entry written
        UPDATE workqueue_ratebucket AS b
           SET tat = s.start + make_interval(secs => s.items * s.interval_s),
               free_at = CASE WHEN s.free_at > now() THEN s.free_at ELSE b.free_at END
          FROM rate_spend s
         WHERE s.items > 0 AND b.limit_id = s.limit_id AND b.key = s.key
    )
    SELECT (SELECT array_agg(p.id ORDER BY p.n)
              FROM unnest(picked_ids) WITH ORDINALITY AS p(id, n)
             WHERE p.id NOT IN (SELECT id FROM rate_refused)),
           -- when the soonest bucket this claim trimmed (spent to its allowance) allows one more
           (SELECT min(r.start + make_interval(secs => (r.room - r.burst + 1) * r.interval_s))
              FROM rate_room r WHERE r.room < cardinality(r.ids))
      INTO granted_ids, next_free_at;
END
$fn$;
