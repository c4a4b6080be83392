-- sample_pending: at the first pass of each minute (by the database clock), count each tenant's pending items per lane into that minute's row, as the lane's depth, and write how long the oldest due one of each tenant's kind in a lane has waited (a kind not among `kinds` as one); returns whether it counted (false: this minute's are counted already) and how many rows it wrote
-- Read from the ready ring (workqueue_ready: a row per pending item, its slots small whatever the items' history). A minute a tenant's lane had
-- nothing pending keeps 0: the rows of that minute written by the rollup start at 0.
WITH turn AS (
    UPDATE workqueue_rollupstate
       SET pending_minute = date_trunc('minute', now())
     WHERE name = 'attempts' AND pending_minute IS DISTINCT FROM date_trunc('minute', now())
    RETURNING pending_minute AS minute
), counted AS (
    SELECT t.minute, w.org_id,
           CASE WHEN w.lane = ANY(%(lanes)s::text[]) THEN w.lane ELSE '(undeclared)' END AS lane,
           count(*) AS pending
      FROM turn t
      JOIN workqueue_ready w ON true
     GROUP BY t.minute, w.org_id, 3
), oldest AS (
    SELECT t.minute, w.org_id,
           CASE WHEN w.lane = ANY(%(lanes)s::text[]) THEN w.lane ELSE '(undeclared)' END AS lane,
           CASE WHEN w.kind = ANY(%(kinds)s::text[]) THEN w.kind ELSE '(unknown)' END AS kind,
           EXTRACT(EPOCH FROM now() - min(w.available_at))::float8 AS oldest_wait_s
      FROM turn t
      JOIN workqueue_ready w ON w.available_at <= now()
     GROUP BY t.minute, w.org_id, 3, 4
), oldest_written AS (
    INSERT INTO workqueue_kindminute AS m (minute, org_id, lane, kind, oldest_wait_s, runs)
    SELECT o.minute, o.org_id, o.lane, o.kind, o.oldest_wait_s,
           array_fill(0, ARRAY[cardinality(%(bounds)s::float8[]) + 1])
      FROM oldest o
    ON CONFLICT (minute, org_id, lane, kind) DO UPDATE SET oldest_wait_s = excluded.oldest_wait_s
    RETURNING 1
), written AS (
    INSERT INTO workqueue_laneminute AS m (minute, org_id, lane, done, failed, dead, waits, pending)
    SELECT c.minute, c.org_id, c.lane, 0, 0, 0,
           array_fill(0, ARRAY[cardinality(%(bounds)s::float8[]) + 1]), c.pending
      FROM counted c
    ON CONFLICT (minute, org_id, lane) DO UPDATE SET pending = excluded.pending
    RETURNING 1
)
SELECT EXISTS (SELECT FROM turn) AS sampled, (SELECT count(*) FROM written) AS rows
