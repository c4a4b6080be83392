-- claim_rate_granted: of the picked items, those every rate limit they fall under allows now, in claim order; spends them from each bucket (GCRA: tat = greatest(tat, now()) + kept * interval, interval = period_s / count), the buckets locked FOR UPDATE in key order after the items (a claimer waits for another's commit and reads its fresh tat); an item trimmed is left pending, no attempt spent
-- A bucket seen for the first time is made full (its burst); if another claimer made it first (after this claim's
-- snapshot), this claim takes none of its items this time.
rate_wanted AS MATERIALIZED (
    -- each picked item under each limit it falls under, ranked within the bucket in claim order
    SELECT p.id, l.id AS limit_id, v.key, l.burst, l.interval_s,
           row_number() OVER (PARTITION BY l.id, v.key ORDER BY p.n) AS rank
      FROM unnest((SELECT ids FROM picked)::uuid[]) WITH ORDINALITY AS p(id, n)
      JOIN workqueue_workitem w ON w.id = p.id
      CROSS JOIN rate_limits l
      CROSS JOIN LATERAL (SELECT CASE l.scope WHEN 'kind' THEN w.kind WHEN 'lane' THEN w.lane
                                              WHEN 'tenant' THEN w.org_id::text
                                              ELSE w.rate_key END AS key) AS v
     WHERE v.key IS NOT NULL AND (l.target = '*' OR l.target = v.key)
), rate_held AS MATERIALIZED (
    SELECT b.limit_id, b.key, b.tat
      FROM workqueue_ratebucket b
     WHERE (b.limit_id, b.key) IN (SELECT limit_id, key FROM rate_wanted)
     ORDER BY b.limit_id, b.key
       FOR UPDATE OF b
), rate_room AS MATERIALIZED (
    -- each bucket's allowance now: floor((now() + burst * interval - greatest(tat, now())) / interval)
    SELECT k.limit_id, k.key, k.interval_s, h.tat IS NULL AS new,
           GREATEST(h.tat, now()) AS start,
           floor(k.burst - extract(epoch FROM GREATEST(h.tat, now()) - now()) / k.interval_s)
               AS room
      FROM (SELECT DISTINCT limit_id, key, burst, interval_s FROM rate_wanted) AS k
      LEFT JOIN rate_held h ON h.limit_id = k.limit_id AND h.key = k.key
), rate_kept AS MATERIALIZED (
    SELECT w.id
      FROM rate_wanted w
      JOIN rate_room r ON r.limit_id = w.limit_id AND r.key = w.key
     GROUP BY w.id
    HAVING bool_and(w.rank <= r.room)
), rate_made AS (
    INSERT INTO workqueue_ratebucket (limit_id, key, tat)
    SELECT r.limit_id, r.key, now() + make_interval(secs => count(*) * r.interval_s)
      FROM rate_room r
      JOIN rate_wanted w ON w.limit_id = r.limit_id AND w.key = r.key
     WHERE r.new AND w.id IN (SELECT id FROM rate_kept)
     GROUP BY r.limit_id, r.key, r.interval_s
     ORDER BY r.limit_id, r.key
        ON CONFLICT (limit_id, key) DO NOTHING
    RETURNING limit_id, key
), rate_granted AS MATERIALIZED (
    -- kept, and not under a new bucket another claimer made first
    SELECT k.id
      FROM rate_kept k
     WHERE NOT EXISTS (
           SELECT FROM rate_wanted w
             JOIN rate_room r ON r.limit_id = w.limit_id AND r.key = w.key
            WHERE w.id = k.id AND r.new
              AND NOT EXISTS (SELECT FROM rate_made m
                               WHERE m.limit_id = r.limit_id AND m.key = r.key))
), rate_spent AS (
    UPDATE workqueue_ratebucket AS b
       SET tat = r.start + make_interval(secs => s.items * r.interval_s)
      FROM rate_room r,
           (SELECT w.limit_id, w.key, count(*) AS items
              FROM rate_wanted w
             WHERE w.id IN (SELECT id FROM rate_granted)
             GROUP BY w.limit_id, w.key) AS s
     WHERE NOT r.new AND s.limit_id = r.limit_id AND s.key = r.key
       AND b.limit_id = r.limit_id AND b.key = r.key
), granted AS (
    SELECT array_agg(p.id ORDER BY p.n) AS ids
      FROM unnest((SELECT ids FROM picked)::uuid[]) WITH ORDINALITY AS p(id, n)
     WHERE p.id NOT IN (SELECT id FROM rate_wanted) OR p.id IN (SELECT id FROM rate_granted)
