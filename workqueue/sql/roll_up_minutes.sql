-- roll_up_minutes: count the next `batch` attempts past the rollup's place (up to its mark, once every transaction in progress when the mark was taken has ended, or the mark is `grace_s` old) into their minute's row per tenant and lane: done, failed, dead letters, and the wait of each claim that ended its item (a histogram over `bounds`); and per tenant, lane and kind (a kind not among `kinds` as one), how long each attempt a handler ran took, from its claim to its end (a histogram over `bounds`); move the place on, and on reaching the mark take a new one (the newest attempt id visible now, this snapshot); returns whether the place was found, how many attempts were counted, whether the mark was settled and reached, and whether attempts wait past the new place
-- A lease that ran out (or a holder gone) on an item whose attempts were spent made a dead letter: requeue_stale.sql
-- ends its error with '; attempts spent' (tests/contract/test_minutes.py holds the two together). The wait is read from
-- the item, whose available_at is the claim's due time as long as the claim is its latest: a claim that failed and was
-- retried had its due time replaced by the retry's, and is not in the histogram.
WITH place AS (
    SELECT s.through_id, s.mark_id, s.mark_snapshot, s.marked_at
      FROM workqueue_rollupstate s
     WHERE s.name = 'attempts'
       FOR UPDATE
), settled AS (
    SELECT p.through_id AS low,
           COALESCE((SELECT a.id FROM workqueue_attempt a
                      WHERE a.id > p.through_id AND a.id <= p.mark_id
                      ORDER BY a.id OFFSET %(batch)s::integer - 1 LIMIT 1), p.mark_id) AS high,
           p.mark_id
      FROM place p
     WHERE p.marked_at < now() - make_interval(secs => %(grace_s)s::float8)
        OR NOT EXISTS (SELECT FROM pg_snapshot_xip(p.mark_snapshot::pg_snapshot) AS then_(xid)
                        WHERE then_.xid IN (SELECT pg_snapshot_xip(pg_current_snapshot())))
), ended AS (
    SELECT date_trunc('minute', a.ended_at) AS minute, a.org_id,
           CASE WHEN i.lane = ANY(%(lanes)s::text[]) THEN i.lane ELSE '(undeclared)' END AS lane,
           a.outcome,
           a.outcome = 'dead_lettered'
           OR (a.outcome IN ('lease_expired', 'holder_gone') AND a.error LIKE '%%; attempts spent') AS dead,
           CASE WHEN a.outcome IN ('done', 'dead_lettered') AND i.claimed_at = a.started_at
                     AND i.available_at <= a.started_at
                THEN width_bucket(EXTRACT(EPOCH FROM a.started_at - i.available_at)::float8,
                                  %(bounds)s::float8[]) END AS bucket,
           CASE WHEN i.kind = ANY(%(kinds)s::text[]) THEN i.kind ELSE '(unknown)' END AS kind,
           CASE WHEN a.outcome IN ('done', 'retried', 'dead_lettered')
                THEN width_bucket(GREATEST(EXTRACT(EPOCH FROM a.ended_at - a.started_at), 0)::float8,
                                  %(bounds)s::float8[]) END AS run_bucket
      FROM settled s
      JOIN workqueue_attempt a ON a.id > s.low AND a.id <= s.high
      JOIN workqueue_workitem i ON i.id = a.item_id
     WHERE a.ended_at >= now() - make_interval(secs => %(retention_s)s::float8)
), counted AS (
    SELECT e.minute, e.org_id, e.lane,
           count(*) FILTER (WHERE e.outcome = 'done') AS done,
           count(*) FILTER (WHERE e.outcome <> 'done') AS failed,
           count(*) FILTER (WHERE e.dead) AS dead,
           array_agg(e.bucket) FILTER (WHERE e.bucket IS NOT NULL) AS buckets
      FROM ended e
     GROUP BY e.minute, e.org_id, e.lane
), added AS (
    INSERT INTO workqueue_laneminute AS m (minute, org_id, lane, done, failed, dead, waits, pending)
    SELECT c.minute, c.org_id, c.lane, c.done, c.failed, c.dead,
           ARRAY(SELECT count(b.k)::integer
                   FROM generate_series(0, cardinality(%(bounds)s::float8[])) AS k(k)
                   LEFT JOIN unnest(c.buckets) AS b(k) ON b.k = k.k
                  GROUP BY k.k ORDER BY k.k),
           0
      FROM counted c
    ON CONFLICT (minute, org_id, lane) DO UPDATE
       SET done = m.done + excluded.done, failed = m.failed + excluded.failed,
           dead = m.dead + excluded.dead,
           waits = ARRAY(SELECT COALESCE(t.was, 0) + COALESCE(t.more, 0)
                           FROM unnest(m.waits, excluded.waits) WITH ORDINALITY AS t(was, more, k)
                          ORDER BY t.k)
    RETURNING 1
), ran AS (
    SELECT e.minute, e.org_id, e.lane, e.kind, array_agg(e.run_bucket) AS buckets
      FROM ended e
     WHERE e.run_bucket IS NOT NULL
     GROUP BY e.minute, e.org_id, e.lane, e.kind
), ran_added AS (
    INSERT INTO workqueue_kindminute AS m (minute, org_id, lane, kind, oldest_wait_s, runs)
    SELECT r.minute, r.org_id, r.lane, r.kind, NULL,
           ARRAY(SELECT count(b.k)::integer
                   FROM generate_series(0, cardinality(%(bounds)s::float8[])) AS k(k)
                   LEFT JOIN unnest(r.buckets) AS b(k) ON b.k = k.k
                  GROUP BY k.k ORDER BY k.k)
      FROM ran r
    ON CONFLICT (minute, org_id, lane, kind) DO UPDATE
       SET runs = ARRAY(SELECT COALESCE(t.was, 0) + COALESCE(t.more, 0)
                          FROM unnest(m.runs, excluded.runs) WITH ORDINALITY AS t(was, more, k)
                         ORDER BY t.k)
    RETURNING 1
), moved AS (
    UPDATE workqueue_rollupstate AS r
       SET through_id = s.high,
           mark_id = CASE WHEN s.high >= s.mark_id
                          THEN (SELECT COALESCE(max(a.id), 0) FROM workqueue_attempt a) ELSE r.mark_id END,
           mark_snapshot = CASE WHEN s.high >= s.mark_id
                                THEN pg_current_snapshot()::text ELSE r.mark_snapshot END,
           marked_at = CASE WHEN s.high >= s.mark_id THEN now() ELSE r.marked_at END
      FROM settled s
     WHERE r.name = 'attempts'
    RETURNING r.through_id, r.mark_id, s.high >= s.mark_id AS reached
)
SELECT (SELECT count(*) FROM place) AS found,
       (SELECT count(*) FROM ended) AS attempts,
       (SELECT count(*) FROM added) AS minutes,
       EXISTS (SELECT FROM moved) AS settled,
       COALESCE((SELECT reached FROM moved), false) AS reached,
       COALESCE((SELECT through_id < mark_id FROM moved), false) AS more
