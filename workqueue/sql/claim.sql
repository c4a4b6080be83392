-- claim: hand out up to limit pending, due items of the lane and kinds, round-robin across the tenants with work (weighted by their share, within their in-flight cap, priority first), locking them with the compiled select_for_update(skip_locked=True) queryset of workqueue/claim.py; each gets a fresh token, a lease, and one attempt spent
-- Tenants are found by a loose index scan (one index descent per tenant) from a random start, at most limit of them
-- per claim; each offers its first items in priority then age order (up to twice its share of the batch, within its
-- cap); the batch takes them by priority, then by turn (item j of a tenant of weight w comes at j / w), then by age.
-- What other claimers hold of those offers is filled from the rest of the lane in priority then age order (fallback).
-- Each row comes back with what its context needs (tenancy_live, tenancy_role: the lookup tenancy.services.CONTEXTS_SQL
-- spells too; tests/contract/test_claim_and_settle.py holds the two together), so a claim costs one round trip.
-- synchronous_commit: 'on' (the default) makes the attempt durable before any handler runs; 'off' trades that for speed.
WITH RECURSIVE commit_mode AS MATERIALIZED (
    SELECT set_config('synchronous_commit', %(synchronous_commit)s::text, true) AS setting
), start AS MATERIALIZED (
    SELECT gen_random_uuid() AS org_id
), tenants (org_id, first_org_id, n) AS (
    SELECT f.org_id, f.org_id, 1
      FROM (SELECT COALESCE(
              (SELECT w.org_id FROM workqueue_workitem w
                WHERE w.status = 'pending' AND w.lane = %(lane)s::text
                  AND w.org_id >= (SELECT org_id FROM start)
                ORDER BY w.lane, w.org_id LIMIT 1),
              (SELECT w.org_id FROM workqueue_workitem w
                WHERE w.status = 'pending' AND w.lane = %(lane)s::text
                ORDER BY w.lane, w.org_id LIMIT 1)) AS org_id) AS f
     WHERE f.org_id IS NOT NULL
    UNION ALL
    SELECT nxt.org_id, t.first_org_id, t.n + 1
      FROM tenants t,
           LATERAL (SELECT COALESCE(
              (SELECT w.org_id FROM workqueue_workitem w
                WHERE w.status = 'pending' AND w.lane = %(lane)s::text AND w.org_id > t.org_id
                ORDER BY w.lane, w.org_id LIMIT 1),
              (SELECT w.org_id FROM workqueue_workitem w
                WHERE w.status = 'pending' AND w.lane = %(lane)s::text
                ORDER BY w.lane, w.org_id LIMIT 1)) AS org_id) AS nxt
     WHERE t.n < %(limit)s::integer AND nxt.org_id <> t.first_org_id
), in_flight AS (
    SELECT w.org_id, count(*) AS items
      FROM workqueue_workitem w
     WHERE %(capped)s::boolean AND w.status = 'claimed' AND w.lane = %(lane)s::text
     GROUP BY w.org_id
), shares AS (
    SELECT t.org_id,
           COALESCE(s.weight, 1.0)::float8 AS weight,
           COALESCE(s.max_in_flight, %(default_cap)s::integer) - COALESCE(f.items, 0) AS room
      FROM tenants t
      LEFT JOIN workqueue_tenantshare s ON s.org_id = t.org_id
      LEFT JOIN in_flight f ON f.org_id = t.org_id
), offers AS (
    SELECT org_id, weight,
           LEAST(%(limit)s::integer,
                 2 * ceil(%(limit)s::integer * weight / sum(weight) OVER ())::integer,
                 COALESCE(room, %(limit)s::integer)) AS items
      FROM shares
), candidates AS (
    SELECT c.id, c.priority, c.available_at,
           (row_number() OVER (PARTITION BY o.org_id ORDER BY c.priority DESC, c.available_at))
               / o.weight AS turn
      FROM offers o,
           LATERAL (SELECT w.id, w.priority, w.available_at
                      FROM workqueue_workitem w
                     WHERE w.status = 'pending' AND w.lane = %(lane)s::text AND w.org_id = o.org_id
                       AND w.available_at <= now() AND w.kind = ANY(%(kinds)s::text[])
                     ORDER BY w.lane, w.org_id, w.priority DESC, w.available_at
                     LIMIT o.items) AS c
     WHERE o.items > 0
), ordered AS (
    SELECT array_agg(id ORDER BY priority DESC, turn, available_at) AS ids FROM candidates
), fair AS (
    {locking}
), fallback AS (
    {fallback}
), picked AS (
    SELECT id FROM fair UNION ALL SELECT id FROM fallback
), claimed AS (
UPDATE workqueue_workitem AS w
   SET status = 'claimed',
       claimed_by = %(worker_id)s::text,
       claim_token = gen_random_uuid(),
       lease_expires_at = now() + make_interval(secs => %(lease_s)s::float8),
       attempts = w.attempts + 1,
       updated_at = now(),
       updated_by = '00000000-0000-0000-0000-000000000000'
  FROM picked, commit_mode
 WHERE w.id = picked.id
RETURNING w.*
)
SELECT c.*,
       array_position((SELECT ids FROM ordered), c.id) AS claim_order,
       o.id IS NOT NULL AND o.gone_at IS NULL AS tenancy_live,
       m.role AS tenancy_role
  FROM claimed c
  LEFT JOIN tenancy_org o ON o.id = c.org_id
  LEFT JOIN tenancy_membership m
    ON m.org_id = c.org_id AND m.user_id = c.created_by AND m.ended_at IS NULL
