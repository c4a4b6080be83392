-- claim_oldest_first: the claim with fairness off (WORKQUEUE["FAIR_CLAIM"] false): lock up to limit pending, due items of the lane and kinds (their rows of the ready ring, workqueue_ready, which it takes) in priority then age order across tenants (not of a paused lane or kind, within the lane's and each kind's cap, one per concurrency key: the controls as in claim.sql), skipping rows another claimer holds (the locking subquery is the queryset workqueue/claim.py compiles: select_for_update(skip_locked=True)); each gets a fresh token, a lease, and one attempt spent
-- Each row comes back with what its context needs (tenancy_live, tenancy_role: the claim_contexts part, the tenancy's own
-- lookup, tenancy.modes), so a claim costs one round trip.
-- Rate limits: rate_blocked, granted and rate_wait_s as in claim.sql.
-- synchronous_commit: 'on' (the default) makes the attempt durable before any handler runs; 'off' trades that for speed.
WITH commit_mode AS MATERIALIZED (
    SELECT set_config('synchronous_commit', %(synchronous_commit)s::text, true) AS setting
), running AS (
    -- what the lane holds now, by kind: counted only while a cap is in effect
    SELECT w.kind, count(*) AS items
      FROM ONLY workqueue_workitem w
     WHERE %(capped)s::boolean AND w.status = 'claimed' AND w.lane = %(lane)s::text
     GROUP BY w.kind
), {claim_controls}
), {rate_blocked}
), candidates AS (
    {locking}
), pick AS (
    -- a capped kind takes at most the room its cap leaves; the items in claim order (n), with
    -- what the rate limits' part finds their limits by
    SELECT c.id, c.kind, c.org_id, c.rate_key, c.slot, c.priority, c.available_at,
           row_number() OVER (ORDER BY c.priority DESC, c.available_at, c.id) AS n
      FROM (SELECT id, kind, org_id, rate_key, slot, priority, available_at,
                   row_number() OVER (PARTITION BY kind ORDER BY priority DESC, available_at) AS nth
              FROM candidates) AS c
     WHERE c.nth <= COALESCE((SELECT r.room FROM kind_room r WHERE r.kind = c.kind), c.nth)
), picked AS (
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
SELECT * FROM ({claim_contexts}) AS contexts{rate_next_join}
 ORDER BY priority DESC, available_at, id
