-- rate_grant_v2: what rate_grant_v1 grants and spends, the same for every call, with a path of its own for the common case: every picked item in one bucket (one scope has limits, the items share their key in it, one limit of that scope counts them), found, locked and spent by key in four short statements; every other case goes to rate_grant_v1 as it is
-- Why a path of its own: a limit on a kind (or a lane, or one tenant) counts every item a claim of that kind picks,
-- and v1's statement, started whole on each call (PostgreSQL starts every node of a plan each time it runs it), cost
-- such a claim of 100 about 0.45 ms of the server's time more than these statements do (bench/RESULTS.md).
-- Each statement here reads its own snapshot (VOLATILE), v1's one: a limit set or changed between two of them is
-- seen by the next claim, as one set just after the claim's statement would be.
-- SECURITY INVOKER (the default): it reads and writes as its caller, the claim's system login.
CREATE FUNCTION workqueue_rate_grant_v2(
    picked_ids uuid[], picked_kinds text[], picked_org_ids uuid[], picked_rate_keys text[], picked_lane text,
    OUT granted_ids uuid[], OUT next_free_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    scopes text[];        -- the scopes that have a limit
    bucket_key text;      -- the key every picked item has in the one scope that has limits
    limits_found integer; -- how many limits of that scope count them (NULL: not looked up)
    bucket_limit bigint;  -- the one limit that counts them: its id, burst and interval
    bucket_burst integer;
    bucket_interval_s float8;
    bucket_tat timestamptz;  -- its bucket's tat, locked (NULL: the bucket is new)
    start timestamptz;
    new_tat timestamptz;     -- the bucket's tat and free_at after what it keeps
    new_free_at timestamptz;
    room integer;
    kept integer := cardinality(picked_ids);
    made integer;
BEGIN
    IF COALESCE(kept, 0) = 0 THEN  -- nothing picked: nothing granted, as v1
        RETURN;
    END IF;
    -- probes of the limits' unique index on (scope, target), one row at most each (LIMIT keeps
    -- them probes whatever the planner guesses of the table: a scan of 1,000 limits for each
    -- scope without one cost more than all the rest)
    SELECT array_agg(s.scope) INTO scopes
      FROM (VALUES ('kind'), ('lane'), ('tenant'), ('key')) AS s(scope)
     WHERE (SELECT r.target FROM workqueue_ratelimit r
             WHERE r.scope = s.scope ORDER BY r.target LIMIT 1) IS NOT NULL;
    IF cardinality(scopes) = 1 THEN
        bucket_key := CASE scopes[1]
            WHEN 'kind' THEN CASE WHEN picked_kinds[1] = ALL (picked_kinds) THEN picked_kinds[1] END
            WHEN 'lane' THEN picked_lane
            WHEN 'tenant' THEN CASE WHEN picked_org_ids[1] = ALL (picked_org_ids)
                                    THEN picked_org_ids[1]::text END
            WHEN 'key' THEN CASE WHEN picked_rate_keys[1] = ALL (picked_rate_keys)
                                 THEN picked_rate_keys[1] END
        END;
    END IF;
    IF bucket_key IS NOT NULL AND bucket_key <> '*' THEN
        -- the limits of that scope that count them: the key's own and '*'
        SELECT count(*), min(l.id), min(l.burst), min(l.interval_s)
          INTO limits_found, bucket_limit, bucket_burst, bucket_interval_s
          FROM ((SELECT r.id, r.burst, r.period_s::float8 / r.count AS interval_s
                   FROM workqueue_ratelimit r
                  WHERE r.scope = scopes[1] AND r.target = bucket_key LIMIT 1)
                UNION ALL
                (SELECT r.id, r.burst, r.period_s::float8 / r.count
                   FROM workqueue_ratelimit r
                  WHERE r.scope = scopes[1] AND r.target = '*' LIMIT 1)) AS l;
        IF limits_found = 0 THEN  -- no limit counts them (the scope's limits name other keys)
            granted_ids := picked_ids;
            RETURN;
        END IF;
    END IF;
    IF limits_found IS DISTINCT FROM 1 THEN
        -- not one bucket (more than one scope has limits, the items' keys differ, or the key's
        -- own limit and '*' both count them): v1's case
        SELECT * INTO granted_ids, next_free_at
          FROM workqueue_rate_grant_v1(picked_ids, picked_kinds, picked_org_ids, picked_rate_keys,
                                       picked_lane);
        RETURN;
    END IF;
    -- as v1: the bucket's allowance now, floor((now() + burst * interval - greatest(tat, now())) / interval)
    SELECT b.tat INTO bucket_tat
      FROM workqueue_ratebucket b
     WHERE b.limit_id = bucket_limit AND b.key = bucket_key
       FOR UPDATE;
    start := GREATEST(bucket_tat, now());
    room := GREATEST(floor(bucket_burst - extract(epoch FROM start - now()) / bucket_interval_s), 0)::integer;
    granted_ids := picked_ids;
    IF room < kept THEN
        -- the items past the allowance; when the bucket allows one more
        granted_ids := CASE WHEN room > 0 THEN picked_ids[1:room] END;
        next_free_at := start + make_interval(secs => (room - bucket_burst + 1) * bucket_interval_s);
        kept := room;
    END IF;
    -- free_at: when the bucket allows one more, tat - (burst - 1) * interval (a new bucket's
    -- start is now(), as v1 makes it)
    new_tat := start + make_interval(secs => kept * bucket_interval_s);
    new_free_at := start + make_interval(secs => (kept - bucket_burst + 1) * bucket_interval_s);
    IF bucket_tat IS NULL THEN
        -- a new bucket, made full and spent; if another claimer made it first (after this
        -- statement's snapshot), this claim takes none of its items this time
        INSERT INTO workqueue_ratebucket (limit_id, key, tat, free_at)
        VALUES (bucket_limit, bucket_key, new_tat, new_free_at)
            ON CONFLICT (limit_id, key) DO NOTHING;
        GET DIAGNOSTICS made = ROW_COUNT;
        IF made = 0 THEN
            granted_ids := NULL;
        END IF;
    ELSIF kept > 0 THEN
        -- as v1: free_at written only when the bucket allows nothing now (a HOT update otherwise)
        UPDATE workqueue_ratebucket AS b
           SET tat = new_tat,
               free_at = CASE WHEN new_free_at > now() THEN new_free_at ELSE b.free_at END
         WHERE b.limit_id = bucket_limit AND b.key = bucket_key;
    END IF;
END
$fn$;
