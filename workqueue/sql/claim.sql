-- claim: hand out up to limit pending, due items of the lane and kinds (found in the ready ring, workqueue_ready, whose rows it takes), round-robin across the tenants with work (weighted by their share, within their in-flight cap, priority first; not of a paused lane or kind, within the lane's and each kind's cap, one per concurrency key), locking them with the compiled select_for_update(skip_locked=True) queryset of workqueue/claim.py; each gets a fresh token, a lease, and one attempt spent
-- Tenants are found by a loose index scan of the ring (one index descent per tenant and slot) from a random start, at most limit of them
-- per claim; each offers its first items in priority then age order (its weighted share of the batch, within its cap),
-- locked as they are read; the batch takes them by priority, then by turn (item j of a tenant of weight w comes at
-- j / w), then by age. What the offers leave short (rows other claimers hold, tenants with less than their share) is
-- filled from the rest of the lane in priority then age order (fallback).
-- Each row comes back with what its context needs (tenancy_live, tenancy_role: the claim_contexts part, the tenancy's own
-- lookup, tenancy.modes), so a claim costs one round trip.
-- synchronous_commit: 'on' (the default) makes the attempt durable before any handler runs; 'off' trades that for speed.
-- Controls (workqueue_pause, LANE_CAPS, Kind.max_running, concurrency_key): allowed names the kinds the claim may take
-- (not paused, below their cap) and the room the lane's cap leaves, read once; the locking subqueries take only an item
-- without a key, or the first waiting item of its key while no item of that key is claimed (the unique index
-- workitem_one_claimed_per_key refuses a second whatever a claimer believed).
-- Rate limits (workqueue_ratelimit): rate_blocked and granted are the claim_rate_blocked and claim_rate_granted parts
-- while any limit is set (workqueue/claim_statements.py), else granted is picked as it is and rate_blocked is unread;
-- with them, every row carries rate_wait_s (rate_next), and a claim that took nothing returns one row with it alone.
WITH RECURSIVE commit_mode AS MATERIALIZED (
    SELECT set_config('synchronous_commit', %(synchronous_commit)s::text, true) AS setting
), running AS (
    -- what the lane holds now, by tenant and kind: counted only while a cap is in effect
    SELECT w.org_id, w.kind, count(*) AS items
      FROM ONLY workqueue_workitem w
     WHERE %(capped)s::boolean AND w.status = 'claimed' AND w.lane = %(lane)s::text
     GROUP BY w.org_id, w.kind
), {claim_controls}
), {rate_blocked}
), start AS MATERIALIZED (
    SELECT gen_random_uuid() AS org_id
), tenants (org_id, first_org_id, n) AS (
    SELECT f.org_id, f.org_id, 1
      FROM (SELECT COALESCE(
              (SELECT r.org_id FROM workqueue_ready r
                WHERE r.slot > 0 AND r.lane = %(lane)s::text
                  AND r.org_id >= (SELECT org_id FROM start)
                ORDER BY r.lane, r.org_id LIMIT 1),
              (SELECT r.org_id FROM workqueue_ready r
                WHERE r.slot > 0 AND r.lane = %(lane)s::text
                ORDER BY r.lane, r.org_id LIMIT 1)) AS org_id) AS f
     WHERE f.org_id IS NOT NULL
       AND (SELECT cardinality(a.kinds) > 0 AND a.room > 0 FROM allowed a)
    UNION ALL
    SELECT nxt.org_id, t.first_org_id, t.n + 1
      FROM tenants t,
           LATERAL (SELECT COALESCE(
              (SELECT r.org_id FROM workqueue_ready r
                WHERE r.slot > 0 AND r.lane = %(lane)s::text AND r.org_id > t.org_id
                ORDER BY r.lane, r.org_id LIMIT 1),
              (SELECT r.org_id FROM workqueue_ready r
                WHERE r.slot > 0 AND r.lane = %(lane)s::text
                ORDER BY r.lane, r.org_id LIMIT 1)) AS org_id) AS nxt
     WHERE t.n < %(limit)s::integer AND nxt.org_id <> t.first_org_id
), in_flight AS (
    SELECT org_id, sum(items) AS items FROM running GROUP BY org_id
), shares AS (
    SELECT t.org_id,
           COALESCE(s.weight, 1.0)::float8 AS weight,
           COALESCE(s.max_in_flight, %(default_cap)s::integer) - COALESCE(f.items, 0) AS room
      FROM tenants t
      LEFT JOIN workqueue_tenantshare s ON s.org_id = t.org_id
      LEFT JOIN in_flight f ON f.org_id = t.org_id
), offers AS (
    -- each tenant's weighted share of the batch, within the room its cap leaves
    SELECT org_id, weight,
           LEAST(ceil(%(limit)s::integer * weight / sum(weight) OVER ())::integer,
                 COALESCE(room, %(limit)s::integer)) AS items
      FROM shares
), offered AS (
    -- each tenant's first items in priority then age order, locked as they are read (the
    -- compiled select_for_update(skip_locked=True) queryset, run once per tenant)
    SELECT o.org_id, o.weight, c.id, c.kind, c.rate_key, c.slot, c.priority, c.available_at
      FROM offers AS o, LATERAL ({locking}) AS c
     WHERE o.items > 0
), turns AS (
    SELECT id, kind, org_id, rate_key, slot, priority, available_at,
           (row_number() OVER (PARTITION BY org_id ORDER BY priority DESC, available_at))
               / weight AS turn
      FROM offered
), fair AS (
    -- a capped kind takes at most the room its cap leaves, the lane at most its own
    SELECT id, kind, org_id, rate_key, slot, priority, available_at
      FROM (SELECT t.*, row_number() OVER (PARTITION BY kind ORDER BY priority DESC, turn,
                                                                       available_at) AS nth
              FROM turns t) AS t
     WHERE t.nth <= COALESCE((SELECT r.room FROM kind_room r WHERE r.kind = t.kind), t.nth)
     ORDER BY priority DESC, turn, available_at
     LIMIT LEAST(%(limit)s::integer, (SELECT room FROM allowed))
), fallback AS (
    {fallback}
), pick AS (
    -- the items picked, in claim order (n), with what the rate limits' part finds their limits by
    -- and where their ready rows are
    SELECT id, kind, org_id, rate_key, slot, priority, available_at, row_number() OVER () AS n
      FROM fair
     UNION ALL
    SELECT id, kind, org_id, rate_key, slot, priority, available_at, 1000000 + row_number() OVER ()
      FROM fallback
), picked AS (
    -- One array: the update then finds each row by its key, whatever the planner guesses of
    -- how many the fallback adds (it cannot know, and a big guess means a scan of the table).
    SELECT array_agg(id ORDER BY n) AS ids FROM pick
), {rate_granted}
), claimed AS (
UPDATE ONLY workqueue_workitem AS w
   SET status = 'claimed',
       {claim_set}
  FROM commit_mode
 WHERE w.id = ANY(ARRAY(
           -- the items granted, each still pending: one another transaction has locked since it
           -- was picked (an operator's action, a site's own lock) is passed over, never waited for
           SELECT x.id FROM ONLY workqueue_workitem x
            WHERE x.id = ANY((SELECT ids FROM granted)::uuid[]) AND x.status = 'pending'
              FOR UPDATE SKIP LOCKED))
RETURNING w.*
), taken AS (
    -- the ready rows of the items claimed, by their key (one a limit refused, or passed over,
    -- stays: its item waits, no attempt spent)
    DELETE FROM workqueue_ready r
     USING pick p, claimed c
     WHERE c.id = p.id AND r.slot = p.slot AND r.lane = %(lane)s::text AND r.org_id = p.org_id
       AND r.priority = p.priority AND r.available_at = p.available_at AND r.id = p.id
)
SELECT *, array_position((SELECT ids FROM picked), contexts.id) AS claim_order
  FROM ({claim_contexts}) AS contexts{rate_next_join}
 ORDER BY claim_order
