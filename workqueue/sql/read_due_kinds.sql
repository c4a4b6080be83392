-- read_due_kinds: per lane and kind, the pending items already due and how long the oldest has waited (seconds, by the database clock): what a kind no live worker serves leaves waiting though its lane is served, read from the ready ring (a row per pending item)
SELECT w.lane, w.kind, count(*) AS due,
       EXTRACT(EPOCH FROM now() - min(w.available_at))::float8 AS oldest_age_s
  FROM workqueue_ready w
 WHERE w.available_at <= now()
 GROUP BY w.lane, w.kind
 ORDER BY w.lane, w.kind
 LIMIT 500
